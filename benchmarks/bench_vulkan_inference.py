"""asv suite: inference time and peak memory of each strategy's program on an ET-VK runtime.

Needs a runtime (``LAYOUTBENCH_ET_RUNNER`` or pybindings with VulkanBackend); without one
``setup`` raises NotImplementedError, which asv reports as skipped. asv re-runs ``setup``
before every timed call, so the program is lowered once per process (``_program``) and
``setup`` only loads it. With pybindings one ``execute`` is timed; an executor_runner is
timed as one process running one inference (program load included). With an
executor_runner built with the event tracer, ``track_gpu_dispatch_ms`` also records the
summed GPU time of one inference's dispatches (its ETDump): on a shared machine the
steadier number of the two.
"""

import functools
import tempfile
from pathlib import Path

from benchmarks._zoo import BENCH_MODELS
from harness.pipeline.model import pipeline
from harness.targets.vulkan.dispatches import gpu_summary, node_map, read_dispatches
from harness.targets.vulkan.runners import NO_RUNTIME_REASON, Pybindings, find_runtime
from harness.targets.vulkan.targets import measure_vulkan
from strategies import list_strategies

STRATEGIES = list_strategies()


GPU_RUNS = 5  # inferences whose median dispatch times make one track_gpu_dispatch_ms sample


@functools.cache
def _program(model: str, strategy: str) -> tuple[bytes, dict]:
    """The program and its node map (which node each dispatch is for)."""
    lowered, pte = measure_vulkan(pipeline(model).vulkan_lowering, strategy, {})
    return pte, node_map(lowered)


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
        program, self.nodes = _program(model, strategy)
        self.pte.write_bytes(program)
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

    def track_gpu_dispatch_ms(self, model, strategy):
        if isinstance(self.runtime, Pybindings):
            raise NotImplementedError("GPU dispatch times are read from an executor_runner's ETDump")
        workdir = Path(self.workdir.name)
        self.runtime.execute(self.pte, self.input_files, GPU_RUNS, workdir)
        if not (workdir / "model.etdump").exists():
            raise NotImplementedError("the executor_runner wrote no ETDump: build it with "
                                      "-DEXECUTORCH_ENABLE_EVENT_TRACER=ON")
        return gpu_summary(read_dispatches(workdir / "model.etdump", self.nodes))["gpu_dispatch_ms"]

    track_gpu_dispatch_ms.unit = "ms"
