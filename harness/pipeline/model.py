"""One entry point from a model name to what every target measures.

``ModelPipeline(name)``: name -> :class:`models.ModelSpec` -> exported program (disk cache)
-> ET-VK lowering prefix (everything before the layout pass, shared by all strategies).
Each stage runs on first use and is kept; a stage that failed raises the same error again
without running twice. The sweep, ``explain``, every asv suite and the tests go through it;
:func:`pipeline` keeps one per model for the life of a process (asv, tests).
"""

import functools
import time

import models
from harness.pipeline.export_cache import export_model
from harness.targets.vulkan.lowering import VulkanLowering


class ModelPipeline:
    def __init__(self, name: str):
        self.name = name
        self._stages: dict = {}
        self.export_seconds: float | None = None

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
        return self._stage("spec", lambda: models.create(self.name))

    @property
    def exported(self):
        def export():
            start = time.perf_counter()
            program = export_model(self.spec)
            self.export_seconds = time.perf_counter() - start
            return program

        return self._stage("exported", export)

    @property
    def vulkan_lowering(self) -> VulkanLowering:
        return self._stage("vulkan_lowering", lambda: VulkanLowering.from_exported(self.exported))

    def record_fields(self) -> dict:
        """What a record says about the model itself, as far as it got built."""
        fields = {}
        if "spec" in self._stages and self._stages["spec"][1] is None:
            fields["input_shapes"] = self.spec.input_shapes
        if self.export_seconds is not None:
            fields["export_seconds"] = self.export_seconds
        return fields


@functools.cache
def pipeline(name: str) -> ModelPipeline:
    """The one pipeline of ``name`` in this process."""
    return ModelPipeline(name)
