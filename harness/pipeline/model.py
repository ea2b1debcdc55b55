"""One entry point from a model name to what every target measures.

``ModelPipeline(name)``: name -> :class:`models.ModelSpec` -> exported program (disk cache),
and whatever stage a target derives from them as a :class:`CachedStage` (ET-VK's lowering
prefix: :mod:`harness.targets.vulkan.compile.prefix`). Each stage runs on first use and is
kept; a stage that failed raises the same error again without running twice. The sweep,
``explain``, every asv suite and the tests go through it; :func:`pipeline` keeps one per model
per process. A cached stage is kept on disk under the key its target computes from the
model's name, so every strategy, run, asv process and commit sharing that key loads it in a
fraction of a second instead of computing it again.
"""

import functools
import time
from dataclasses import dataclass
from typing import Callable

import models
from harness.cache import DiskCache
from harness.pipeline.export_cache import export_model


@dataclass(frozen=True)
class CachedStage:
    """A stage a target derives from a model and keeps on disk under ``cache`` and ``key`` (of
    the model's name); ``load_seconds_field``: the record field for how long a load took."""

    name: str
    cache: DiskCache
    key: Callable[[str], str]
    build: Callable[["ModelPipeline"], object]
    dumps: Callable[[object], bytes]
    loads: Callable[[bytes], object]
    load_seconds_field: str


class ModelPipeline:
    def __init__(self, name: str):
        self.name = name
        self._stages: dict = {}
        self.timings: dict = {}
        self.input_shapes: list | None = None  # known once the model is built or a cached stage loaded

    def _stage(self, stage: str, compute):
        if stage not in self._stages:
            try:
                self._stages[stage] = (compute(), None)
            except Exception as error:  # kept and raised again for every later use
                self._stages[stage] = (None, error)
        value, error = self._stages[stage]
        if error is not None:
            raise error
        return value

    @property
    def spec(self) -> models.ModelSpec:
        def build():
            spec = models.create(self.name)
            self.input_shapes = spec.input_shapes
            return spec

        return self._stage("spec", build)

    @property
    def exported(self):
        def export():
            start = time.perf_counter()
            program = export_model(self.spec)
            self.timings["export_seconds"] = time.perf_counter() - start
            return program

        return self._stage("exported", export)

    def cached(self, stage: CachedStage):
        """The value of ``stage``: from its disk cache, else computed now and kept there."""
        return self._stage(stage.name, lambda: self._from_cache(stage, build=True))

    def load_cached(self, stage: CachedStage) -> None:
        """Load ``stage`` now if its disk cache holds it; nothing is computed."""
        if stage.name not in self._stages:
            value = self._from_cache(stage, build=False)
            if value is not None:
                self._stages[stage.name] = (value, None)

    def _from_cache(self, stage: CachedStage, build: bool):
        # Kept with the model's input shapes, which a record carries and a load does not build.
        start = time.perf_counter()
        if build:
            found, cached = stage.cache.get_or_create(
                stage.key(self.name), lambda: (stage.build(self), self.spec.input_shapes), stage.dumps, stage.loads)
        else:
            found, cached = stage.cache.get(stage.key(self.name), stage.loads)
            if not cached:
                return None
        value, self.input_shapes = found
        if cached:
            self.timings[stage.load_seconds_field] = time.perf_counter() - start
        return value

    def record_fields(self) -> dict:
        """What a record says about the model itself, as far as it got built."""
        shapes = {"input_shapes": self.input_shapes} if self.input_shapes is not None else {}
        return {**self.timings, **shapes}


@functools.cache
def pipeline(name: str) -> ModelPipeline:
    """The one pipeline of ``name`` in this process."""
    return ModelPipeline(name)
