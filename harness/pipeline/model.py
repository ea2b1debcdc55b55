"""One entry point from a model name to what every target measures.

``ModelPipeline(name)``: name -> :class:`models.ModelSpec` -> exported program (disk cache)
-> ET-VK lowering prefix (everything before the layout pass, shared by all strategies;
disk cache). Each stage runs on first use and is kept; a stage that failed raises the same
error again without running twice. The sweep, ``explain``, every asv suite and the tests
go through it; :func:`pipeline` keeps one per model for the life of a process (asv, tests).

The lowering prefix is kept on disk once per (model name and source, torch, executorch and
timm versions, the lowering code), so every strategy, later run, asv process and commit
that shares those loads it in a fraction of a second instead of lowering again.
"""

import functools
import hashlib
import json
import time

import models
from harness.cache import DiskCache
from harness.pipeline.export_cache import export_model
from harness.results.provenance import code_digest, provenance
from harness.targets.vulkan import lowering as lowering_code
from harness.targets.vulkan import serialization
from harness.targets.vulkan.lowering import VulkanLowering

PREFIXES = DiskCache("prefixes")


def prefix_key(name: str) -> str:
    """What a model's lowering prefix depends on."""
    facts = provenance()
    key = [name, models.source_digest(name), facts["torch_version"], facts["executorch_version"],
           facts["timm_version"], code_digest(lowering_code, serialization)]
    return hashlib.sha256(json.dumps(key).encode()).hexdigest()[:24]


class ModelPipeline:
    def __init__(self, name: str):
        self.name = name
        self._stages: dict = {}
        self.timings: dict = {}
        self.input_shapes: list | None = None  # known once the model is built or its prefix loaded

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

    @property
    def vulkan_lowering(self) -> VulkanLowering:
        return self._stage("vulkan_lowering", lambda: self._vulkan_lowering(build=True))

    def load_cached_vulkan_lowering(self) -> None:
        """Load the lowering prefix now if the disk cache holds it; nothing is computed."""
        if "vulkan_lowering" not in self._stages:
            lowering = self._vulkan_lowering(build=False)
            if lowering is not None:
                self._stages["vulkan_lowering"] = (lowering, None)

    def _vulkan_lowering(self, build: bool) -> VulkanLowering | None:
        start = time.perf_counter()
        if build:
            found, cached = PREFIXES.get_or_create(
                prefix_key(self.name),
                lambda: (VulkanLowering.from_exported(self.exported), self.spec.input_shapes),
                serialization.dumps, serialization.loads,
            )
        else:
            found, cached = PREFIXES.get(prefix_key(self.name), serialization.loads)
            if not cached:
                return None
        lowering, self.input_shapes = found
        if cached:
            self.timings["prefix_load_seconds"] = time.perf_counter() - start
        return lowering

    def record_fields(self) -> dict:
        """What a record says about the model itself, as far as it got built."""
        shapes = {"input_shapes": self.input_shapes} if self.input_shapes is not None else {}
        return {**self.timings, **shapes}


@functools.cache
def pipeline(name: str) -> ModelPipeline:
    """The one pipeline of ``name`` in this process."""
    return ModelPipeline(name)
