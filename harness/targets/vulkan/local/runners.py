"""Run a .pte on an ExecuTorch runtime: latency, peak memory, outputs, optional ETDump.

Two runtimes, found in the order :func:`locate_runtime` says: an ``executor_runner`` binary
(never a cross build), driven through its flags (``processes`` processes of warm-up and timed
executions, whose ETDumps time each; a runner without the event tracer is timed from outside
as (wall(N + 1 executions) - wall(1 execution)) / N, ``remote_runner.run_timed``); else
ExecuTorch's pybindings, where the program's backend is registered there (the pip wheel has
XNNPACK but not Vulkan), which write an ETDump too. Both run the program in a child process,
so its peak resident memory is that process's alone (``os.wait4``), and both return a
:class:`RunResult`; the latency comes from the ETDump's events where there is one (:mod:`.latency`).
"""

import json
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

from layoutkit.files import cache_folder, refuse_if_others_can_write
from harness.results.results_dir import ResultsDir
from harness.targets.accuracy import eager_outputs, max_abs_error, raw_outputs, tolerance
from harness.targets.base import RUNNER_ENV, RunSettings
from harness.targets.vulkan.local.dispatches import GPU_FIELDS, attributed_gpu_fields
from harness.targets.vulkan.local.latency import latency_fields
from harness.targets.vulkan.remote.remote_runner import (
    etdump_paths, run_child, run_timed, runner_command, written_outputs)
from layoutkit.errors import MeasurementError, UsageError

RUNNER_NAME = "executor_runner"
BUILD_RECORD = "build.json"  # beside each runner runtime build keeps: what it was built from, how, for what
NO_RUNTIME_REASON = (
    "no ExecuTorch runtime with the Vulkan backend: build one with `layoutbench runtime build --source DIR` "
    f"(DIR: an ExecuTorch source tree), or pass --et-runner PATH (or set {RUNNER_ENV}, or put it on PATH or at "
    f"$LAYOUTBENCH_CACHE_DIR/runtime/{RUNNER_NAME}) to an {RUNNER_NAME} built with -DEXECUTORCH_BUILD_VULKAN=ON, "
    "or install ExecuTorch pybindings built with Vulkan"
)
# The rules that find a runtime, in the order find_runtime tries them (``layoutbench runtime`` names the one used).
BY_FLAG = "--et-runner"
BY_ENVIRONMENT = f"${RUNNER_ENV}"
ON_PATH = f"{RUNNER_NAME} on PATH"
IN_CACHE = f"the cache's runtime/{RUNNER_NAME}, put there by hand"
BUILT = "the newest runner `layoutbench runtime build` built or reused"
PYBINDINGS = "ExecuTorch's pybindings, which have the backend registered"


class RuntimeFailure(MeasurementError):
    """The runtime could not run the program (it crashed, or rejected the program)."""


@dataclass
class RunResult:
    wall_clock_ms: list[float] | None  # latencies timed from outside the runtime; None where it wrote an ETDump
    outputs: list[torch.Tensor]
    peak_rss_bytes: int
    etdumps: list[Path]  # one per runtime process, where it wrote them


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
        paths = [workdir / f"input-{index}.bin" for index in range(len(inputs))]
        for path, tensor in zip(paths, inputs):
            path.write_bytes(tensor.contiguous().numpy().tobytes())
        return [str(path) for path in paths]

    def run(self, pte: Path, inputs: list, output_like: list, settings: RunSettings, workdir: Path) -> RunResult:
        # The runner starts in workdir: a relative path would be read from there, not from here.
        pte, workdir = Path(pte).resolve(), Path(workdir).resolve()
        input_files = self.write_inputs(inputs, workdir)

        def execute(count: int) -> tuple[float, int]:  # one runner process: (wall seconds, peak RSS bytes)
            return run_child(runner_command(self.path, pte, input_files, count, workdir), workdir,
                             f"executor_runner {self.path}", RuntimeFailure)

        latencies, peak, etdumps = run_timed(execute, workdir, settings.warmup, settings.iterations, settings.repeats,
                                             settings.processes, RuntimeFailure)
        return RunResult(latencies, raw_outputs(written_outputs(workdir), output_like), peak, etdumps)


class Pybindings:
    """ExecuTorch's Python runtime, run in a child process (``harness.targets.vulkan.local.pybindings_worker``)."""

    name = "pybindings"

    def run(self, pte: Path, inputs: list, output_like: list, settings: RunSettings, workdir: Path) -> RunResult:
        pte, workdir = Path(pte).resolve(), Path(workdir).resolve()
        torch.save(inputs, workdir / "inputs.pt")
        _, peak = run_child([sys.executable, "-m", "harness.targets.vulkan.local.pybindings_worker", str(pte),
                             str(workdir), str(settings.warmup), str(settings.iterations)],
                            workdir, "the pybindings runtime", RuntimeFailure)
        result = torch.load(workdir / "result.pt")
        etdump = workdir / "model.etdump"
        etdumps = [etdump] if etdump.exists() else []
        return RunResult(None if etdumps else result["latencies_ms"], result["outputs"], peak, etdumps)


def pybindings_backends() -> list[str]:
    from executorch.runtime import Runtime

    return list(Runtime.get().backend_registry.registered_backend_names)


def runtime_dir() -> Path:
    """``CACHE/runtime`` (``layoutbench cache`` shows CACHE): a machine's own runner, and the
    builds of ``layoutbench runtime build``."""
    return cache_folder("runtime")


def cached_runner() -> Path:
    """Where a machine's own runner may be put so that no flag is needed:
    ``CACHE/runtime/executor_runner``."""
    return runtime_dir() / RUNNER_NAME


def built_runners() -> list[tuple[Path, dict]]:
    """The runners ``layoutbench runtime build`` keeps as ``CACHE/runtime/<source>-<flags>/executor_runner``,
    newest (built or reused last) first, each with its ``build.json`` (``{}`` where it has none)."""
    built = [path for path in runtime_dir().glob(f"*/{RUNNER_NAME}") if os.access(path, os.X_OK)]
    return [(path, build_record(path)) for path in sorted(built, key=lambda path: path.stat().st_mtime, reverse=True)]


def build_record(binary: Path) -> dict:
    """The ``build.json`` beside a runner ``layoutbench runtime build`` built; ``{}`` where there is none."""
    record = binary.parent / BUILD_RECORD
    return json.loads(record.read_text()) if record.exists() else {}


def newest_built_runner(toolchain: Path | None = None) -> Path | None:
    """The newest of :func:`built_runners` built with ``toolchain`` (None: for this host, which
    is all a host's run may pick: a cross build does not run here); None when there is none."""
    wanted = str(toolchain.resolve()) if toolchain else None
    newest = next((path for path, info in built_runners() if info.get("toolchain") == wanted), None)
    if newest is not None:
        refuse_if_others_can_write(newest.parent)  # it runs as this user
    return newest


def locate_runtime(et_runner: str | None, from_environment: str | None = None) -> tuple[object | None, str | None]:
    """(the runtime to use, the rule that found it), or (None, None): ``--et-runner``,
    ``$LAYOUTBENCH_ET_RUNNER`` (``from_environment``: :class:`harness.targets.base.HostSettings`),
    an ``executor_runner`` on ``PATH``, the cache's own ``runtime/executor_runner``, the newest
    build, then ExecuTorch pybindings that have the Vulkan backend."""
    for path, rule in ((et_runner, BY_FLAG), (from_environment, BY_ENVIRONMENT)):
        if path:
            return ExecutorRunner(shutil.which(path) or path), rule
    cached = cached_runner() if os.access(cached_runner(), os.X_OK) else None
    for path, rule in ((shutil.which(RUNNER_NAME), ON_PATH), (cached, IN_CACHE), (newest_built_runner(), BUILT)):
        if path:
            return ExecutorRunner(str(path)), rule
    if "VulkanBackend" in pybindings_backends():
        return Pybindings(), PYBINDINGS
    return None, None


def find_runtime(et_runner: str | None, from_environment: str | None = None):
    """The runtime to use (:func:`locate_runtime`), or None: the caller marks its records skipped."""
    return locate_runtime(et_runner, from_environment)[0]


def run_program(runtime, pte: Path, eager: torch.nn.Module, inputs: tuple, settings: RunSettings,
                workdir: Path, nodes: dict | None = None, precision: str = "float32") -> dict:
    """Run ``pte`` and compare with ``eager`` on ``inputs`` (within the tolerance of the
    program's ``precision``); the record fields of one run.
    The ETDumps, where the runtime wrote them, are kept beside ``pte`` (``remote_runner.etdump_paths``):
    the latency is read from them, and with ``nodes``, the program's node map
    (``dispatches.node_map``), GPU time is attributed by node (the first process's). Eager's
    outputs are kept too: a device that runs the program elsewhere is held to them on import."""
    reference = eager_outputs(eager, inputs)
    torch.save(reference, ResultsDir.beside(pte, "eager_outputs"))
    workdir.mkdir(parents=True, exist_ok=True)
    result = runtime.run(pte, list(inputs), reference, settings, workdir)
    etdumps = etdump_paths(pte, len(result.etdumps)) if result.etdumps else []
    for written, kept in zip(result.etdumps, etdumps):
        shutil.copyfile(written, kept)
    fields = {**latency_fields(etdumps, settings.iterations, result.wall_clock_ms), "iterations": settings.iterations,
              "peak_rss_bytes": result.peak_rss_bytes, "max_abs_error": max_abs_error(result.outputs, reference),
              "error_tolerance": tolerance(reference, precision), **dict.fromkeys(GPU_FIELDS), "runtime": runtime.name}
    if etdumps and nodes is not None:
        fields.update(attributed_gpu_fields(etdumps[0], nodes))
    return fields


def remove_program(path: Path) -> None:
    """Delete a program, its node map, eager's outputs, another machine's and its ETDumps
    (:meth:`ResultsDir.etdumps`); its inputs stay: no runner reads them without it."""
    path.unlink(missing_ok=True)
    for kind in ("node_map", "eager_outputs"):
        ResultsDir.beside(path, kind).unlink(missing_ok=True)
    shutil.rmtree(ResultsDir.beside(path, "device_outputs"), ignore_errors=True)
    if path.parent.is_dir():
        for stale in ResultsDir.etdumps(path):
            stale.unlink()
