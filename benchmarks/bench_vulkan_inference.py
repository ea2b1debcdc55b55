"""asv suite: inference time and peak memory of each strategy's program on an ET-VK runtime.

Needs a runtime (``LAYOUTBENCH_ET_RUNNER`` or pybindings with VulkanBackend); without one
``setup`` raises NotImplementedError, which asv reports as skipped. asv re-runs ``setup``
before every timed call, so the program is lowered once per process (``_program``) and
``setup`` only loads it. With pybindings one ``execute`` is timed; an executor_runner is
timed as one process running one inference (program load included).
"""

import functools
import tempfile
from pathlib import Path

from benchmarks._zoo import BENCH_MODELS
from harness.pipeline.model import pipeline
from harness.targets.vulkan.runners import NO_RUNTIME_REASON, Pybindings, find_runtime
from harness.targets.vulkan.targets import measure_vulkan
from strategies import list_strategies

STRATEGIES = list_strategies()


@functools.cache
def _program(model: str, strategy: str) -> bytes:
    return measure_vulkan(pipeline(model).vulkan_lowering, strategy, {})


class VulkanInference:
    params = (BENCH_MODELS, STRATEGIES)
    param_names = ("model", "strategy")
    timeout = 1800
    version = "vulkan-inference-1"

    def setup(self, model, strategy):
        # First, so teardown (which asv calls after a skipping setup too) always has it.
        self.workdir = tempfile.TemporaryDirectory()
        self.runtime = find_runtime(None)
        if self.runtime is None:
            raise NotImplementedError(NO_RUNTIME_REASON)
        self.pte = Path(self.workdir.name) / "program.pte"
        self.pte.write_bytes(_program(model, strategy))
        self.inputs = list(pipeline(model).exported.example_inputs[0])
        if isinstance(self.runtime, Pybindings):
            from executorch.runtime import Runtime

            self.method = Runtime.get().load_program(self.pte).load_method("forward")
            self.method.execute(self.inputs)
        else:
            self.input_files = self.runtime.write_inputs(self.inputs, Path(self.workdir.name))

    def teardown(self, model, strategy):
        self.workdir.cleanup()

    def _infer(self):
        if isinstance(self.runtime, Pybindings):
            self.method.execute(self.inputs)
        else:
            self.runtime.execute(self.pte, self.input_files, 1, Path(self.workdir.name))

    def time_vulkan_inference(self, model, strategy):
        self._infer()

    def peakmem_vulkan_inference(self, model, strategy):
        self._infer()
