"""Run a .pte on an ExecuTorch runtime: latency, peak memory, outputs, optional ETDump.

Two runtimes, found in this order (``find_runtime``):

- an ``executor_runner`` binary (``--et-runner PATH`` or ``LAYOUTBENCH_ET_RUNNER``), driven
  through its flags: one process of warm-up and timed executions, whose ETDump times each
  (a runner built with the event tracer); a runner without it is timed from outside as
  (wall(N + 1 executions) - wall(1 execution)) / N (``remote.run_timed``);
- ExecuTorch's pybindings (``executorch.runtime``) when the backend the program needs is
  registered there (the pip wheel has XNNPACK but not Vulkan); they write an ETDump too.

Both run the program in a child process, so its peak resident memory is that process's
alone (``os.wait4``), and both return the same :class:`RunResult`. The latency comes from
the ETDump's events where there is one (``harness.targets.vulkan.latency``).
"""

import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

from harness.cache import cache_root
from harness.targets.accuracy import eager_outputs, max_abs_error, tolerance
from harness.targets.base import RunSettings
from harness.targets.vulkan.dispatches import gpu_summary, read_dispatches
from harness.targets.vulkan.latency import latency_fields
from harness.targets.vulkan.remote import RUNNER_ETDUMP, run_child, run_timed, runner_command
from strategies.errors import MeasurementError, UsageError

RUNNER_ENV = "LAYOUTBENCH_ET_RUNNER"
RUNNER_NAME = "executor_runner"
NO_RUNTIME_REASON = (
    "no ExecuTorch runtime with the Vulkan backend: pass --et-runner PATH (or set "
    f"{RUNNER_ENV}, or put it on PATH or at $LAYOUTBENCH_CACHE_DIR/runtime/{RUNNER_NAME}) to an "
    f"{RUNNER_NAME} built with -DEXECUTORCH_BUILD_VULKAN=ON, or install ExecuTorch pybindings built with Vulkan"
)


class RuntimeFailure(MeasurementError):
    """The runtime could not run the program (it crashed, or rejected the program)."""


@dataclass
class RunResult:
    wall_clock_ms: list[float] | None  # latencies timed from outside the runtime; None where it wrote an ETDump
    outputs: list[torch.Tensor]
    peak_rss_bytes: int
    etdump: Path | None


def _run_child(command: list[str], cwd: Path, label: str) -> tuple[float, int]:
    return run_child(command, cwd, label, RuntimeFailure)


class ExecutorRunner:
    """An ``executor_runner`` binary the user built (with the backend linked in)."""

    name = "executor_runner"

    def __init__(self, path: str):
        self.path = Path(path).expanduser()
        if not (self.path.is_file() and os.access(self.path, os.X_OK)):
            raise UsageError(f"executor_runner '{path}' is not an executable file; check --et-runner / {RUNNER_ENV}")

    @staticmethod
    def write_inputs(inputs: list, workdir: Path) -> list[str]:
        """Each input's raw bytes in its own file, as ``--inputs`` expects."""
        workdir.mkdir(parents=True, exist_ok=True)
        paths = []
        for index, tensor in enumerate(inputs):
            path = workdir / f"input-{index}.bin"
            path.write_bytes(tensor.contiguous().numpy().tobytes())
            paths.append(str(path))
        return paths

    def execute(self, pte: Path, input_files: list[str], count: int, workdir: Path) -> tuple[float, int]:
        """One runner process doing ``count`` inferences: (wall seconds, peak RSS bytes)."""
        return _run_child(runner_command(self.path, pte, input_files, count, workdir), workdir,
                          f"executor_runner {self.path}")

    def run(self, pte: Path, inputs: list, output_like: list, settings: RunSettings, workdir: Path) -> RunResult:
        # The runner starts in workdir: a relative path would be read from there, not from here.
        pte, workdir = Path(pte).resolve(), Path(workdir).resolve()
        input_files = self.write_inputs(inputs, workdir)
        latencies, peak = run_timed(lambda count: self.execute(pte, input_files, count, workdir), workdir,
                                    settings.warmup, settings.iterations, settings.repeats, RuntimeFailure)
        # The runner writes each output's raw bytes to <base>-<index>.bin.
        outputs = [
            torch.frombuffer(bytearray((workdir / f"output-{i}.bin").read_bytes()), dtype=like.dtype).reshape(like.shape)
            for i, like in enumerate(output_like)
        ]
        return RunResult(latencies, outputs, peak, workdir / RUNNER_ETDUMP if latencies is None else None)


class Pybindings:
    """ExecuTorch's Python runtime, run in a child process (``harness.targets.vulkan.pybindings_worker``)."""

    name = "pybindings"

    def run(self, pte: Path, inputs: list, output_like: list, settings: RunSettings, workdir: Path) -> RunResult:
        pte, workdir = Path(pte).resolve(), Path(workdir).resolve()
        torch.save(inputs, workdir / "inputs.pt")
        _, peak = _run_child([
            sys.executable, "-m", "harness.targets.vulkan.pybindings_worker", str(pte), str(workdir),
            str(settings.warmup), str(settings.iterations),
        ], workdir, "the pybindings runtime")
        result = torch.load(workdir / "result.pt")
        etdump = workdir / "model.etdump"
        if etdump.exists():
            return RunResult(None, result["outputs"], peak, etdump)
        return RunResult(result["latencies_ms"], result["outputs"], peak, None)


def pybindings_backends() -> list[str]:
    """Backends registered in this environment's ExecuTorch pybindings."""
    from executorch.runtime import Runtime

    return list(Runtime.get().backend_registry.registered_backend_names)


def cached_runner() -> Path:
    """Where a machine's own runner may be put so that no flag is needed:
    ``CACHE/runtime/executor_runner`` (``layoutbench cache`` shows CACHE)."""
    return cache_root() / "runtime" / RUNNER_NAME


def find_runtime(et_runner: str | None, backend: str = "VulkanBackend"):
    """The runtime to use, or None (the caller marks its records skipped): ``--et-runner``,
    ``$LAYOUTBENCH_ET_RUNNER``, an ``executor_runner`` on ``PATH``, one in the cache, then
    ExecuTorch pybindings that have the backend."""
    path = et_runner or os.environ.get(RUNNER_ENV)
    if path:
        return ExecutorRunner(shutil.which(path) or path)
    found = shutil.which(RUNNER_NAME) or (str(cached_runner()) if os.access(cached_runner(), os.X_OK) else None)
    if found:
        return ExecutorRunner(found)
    if backend in pybindings_backends():
        return Pybindings()
    return None


def measure_run(runtime, pte: Path, eager: torch.nn.Module, inputs: tuple, settings: RunSettings,
                workdir: Path, nodes: dict | None = None, precision: str = "float32") -> dict:
    """Run ``pte`` and compare with ``eager`` on ``inputs`` (within the tolerance of the
    program's ``precision``); the record fields of one run.
    An ETDump, where the runtime wrote one, is kept as ``<pte>.etdump``: the latency is read
    from it, and with ``nodes``, the program's node map (``dispatches.node_map``), GPU time
    is attributed by node."""
    reference = eager_outputs(eager, inputs)
    workdir.mkdir(parents=True, exist_ok=True)
    result = runtime.run(pte, list(inputs), reference, settings, workdir)
    error = max_abs_error(result.outputs, reference)
    etdump = None
    if result.etdump is not None:
        etdump = Path(pte).with_suffix(".etdump")
        shutil.copyfile(result.etdump, etdump)
    fields = {
        **latency_fields(etdump, settings.iterations, result.wall_clock_ms),
        "iterations": settings.iterations,
        "peak_rss_bytes": result.peak_rss_bytes,
        "max_abs_error": error,
        "error_tolerance": tolerance(reference, precision),
        "gpu_dispatch_ms": None,
        "transition_gpu_ms": None,
        "transition_time_share": None,
        "runtime": runtime.name,
    }
    if etdump is not None and nodes is not None:
        fields.update(gpu_summary(read_dispatches(etdump, nodes)))
    return fields
