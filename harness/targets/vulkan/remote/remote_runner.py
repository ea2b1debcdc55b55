"""Running an ``executor_runner``: here (vulkan-run, :func:`run_timed`), and as a script with
Python's standard library only on a machine that has a runner and a GPU but no ExecuTorch, e.g.
a GPU box reached through a job system::

    python3 harness/targets/vulkan/remote/remote_runner.py RESULTS RUNNER OUT.tar.gz [--warmup 1] [--iterations 20] [--processes 3]

It runs every program under ``RESULTS/programs/`` as ``run --target vulkan-run`` left them (each
.pte with its inputs, ``.inputs/input-N.bin``; one sent without its weights,
:mod:`harness.targets.vulkan.remote.weightless`, has them filled again first) in ``--processes``
runner processes of ``warmup + iterations`` executions each, and writes one tar: each program's
ETDumps (:func:`etdump_paths`), the outputs of a program run with its own weights
(:func:`output_paths`; import-remote holds them to eager PyTorch's) and ``remote.json`` (peak
memory, the Vulkan device and its limits, the machine, and wall-clock latencies where the runner
wrote no ETDump; ``--repeats`` is for those only). ``layoutbench import-remote`` turns it into
records, reading the latencies from the ETDumps' events (``harness.targets.vulkan.local.latency``).
``remote_runner.sh`` does the same in POSIX sh, for a device with no Python (``layoutbench pack --bundle``).
"""

import argparse
import hashlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

if __package__:
    from harness.targets.vulkan.remote.device import vulkan_device, vulkan_limits
    from harness.targets.vulkan.remote.weightless import MANIFEST_SUFFIX, refill
else:  # run as a script, where neither harness nor ExecuTorch is importable
    from device import vulkan_device, vulkan_limits
    from weightless import MANIFEST_SUFFIX, refill

REMOTE_SUMMARY = "remote.json"
RUNNER_ETDUMP = "model.etdump"  # where executor_runner writes its ETDump: its working directory


def run_child(command: list[str], cwd: Path, label: str, failure: type = RuntimeError) -> tuple[float, int]:
    """Run one child process: (wall seconds, its peak RSS in bytes); a non-zero exit raises
    ``failure`` with the last line the child wrote to stderr."""
    start = time.perf_counter()
    with open(cwd / "stderr.txt", "wb") as stderr:
        child = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=stderr)
        _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        lines = [line.strip() for line in (cwd / "stderr.txt").read_text(errors="replace").splitlines() if line.strip()]
        raise failure(f"{label} exited with {code}: {(lines or ['no message'])[-1]}")
    return wall, usage.ru_maxrss * 1024


def runner_command(runner: Path, pte: Path, input_files: list[str], count: int, workdir: Path) -> list[str]:
    """executor_runner's flags for ``count`` inferences; every path absolute, since the runner
    starts in ``workdir``. No ``--etdump_path``: a runner built without the event tracer has no such
    flag and exits on it; one built with it writes :data:`RUNNER_ETDUMP` in ``workdir`` by default."""
    return [
        str(runner), f"--model_path={Path(pte).resolve()}", f"--inputs={','.join(input_files)}",
        f"--num_executions={count}", f"--output_file={workdir / 'output'}", "--print_output=none",
    ]


def time_runner(execute, warmup: int, iterations: int, repeats: int,
                failure: type = RuntimeError) -> tuple[list[float], int]:
    """(per-inference latencies in ms, one per repeat; peak RSS) of a runner that writes no ETDump
    (built without the event tracer): one inference = (wall(N + 1 executions) - wall(1)) / N, so
    loading and set-up cancel out. ``execute(count)`` returns (wall seconds, peak RSS). A repeat
    where N inferences took no longer than one is start-up noise, left out (:func:`wall_clock_latencies`)."""
    peak = 0
    for _ in range(warmup):
        peak = max(peak, execute(1)[1])
    walls = []
    for _ in range(repeats):
        one, rss_one = execute(1)
        many, rss_many = execute(iterations + 1)
        peak = max(peak, rss_one, rss_many)
        walls.append((one, many))
    return wall_clock_latencies(walls, iterations, failure), peak


def wall_clock_latencies(walls: list[tuple[float, float]], iterations: int,
                         failure: type = RuntimeError) -> list[float]:
    """Per-inference latencies in ms from (wall seconds of 1, of ``iterations`` + 1 executions)
    pairs, one per repeat (:func:`time_runner`; ``remote_runner.sh`` sends its pairs raw)."""
    latencies = [(many - one) / iterations * 1000 for one, many in walls if many > one]
    if not latencies:
        raise failure(f"{iterations} more inferences never took longer than the runner's start-up varies: "
                      "the program is too fast to time from outside with --iterations "
                      f"{iterations}; raise it (GPU dispatch times from the ETDump are unaffected)")
    return latencies


def etdump_paths(program: Path, processes: int) -> list[Path]:
    """Where the ETDumps of a program run in ``processes`` runner processes are kept, beside it:
    ``<strategy>.etdump`` (the first process's, which profile and costs read), ``<strategy>.2.etdump`` ..."""
    first = Path(program).with_suffix(".etdump")
    return [first, *(first.with_name(f"{first.stem}.{index}.etdump") for index in range(2, processes + 1))]


OUTPUTS_SUFFIX = ".outputs"  # ResultsDir's "device_outputs"
MOST_OUTPUTS = 4096  # more than any program returns: what an archive may promise


def output_paths(program: Path, count: int) -> list[Path]:
    """Where the ``count`` tensor outputs of a program's last execution are kept, beside it:
    ``<strategy>.outputs/output-N.bin``, each tensor's raw bytes, numbered from 0 by their place
    among the outputs that are tensors (as the runner numbers them and eager's are compared)."""
    return [Path(program).with_suffix(OUTPUTS_SUFFIX) / f"output-{index}.bin" for index in range(count)]


def _numbered(folder: Path, prefix: str) -> list[Path]:
    """``folder``'s ``<prefix>-N.bin`` files, by N."""
    return sorted(folder.glob(f"{prefix}-*.bin"), key=lambda path: int(path.stem.split("-")[1]))


def written_outputs(workdir: Path) -> list[Path]:
    """The tensor outputs the runner wrote in ``workdir`` (``--output_file``), in their order."""
    return _numbered(workdir, "output")


def run_timed(execute, workdir: Path, warmup: int, iterations: int, repeats: int, processes: int = 1,
              failure: type = RuntimeError) -> tuple[list[float] | None, int, list[Path]]:
    """Run a program in ``processes`` runner processes of ``warmup + iterations`` executions each
    (``execute(count)`` returns its wall seconds and peak RSS). A runner built with the event tracer
    leaves an ETDump in ``workdir`` timing every execution itself (read where ExecuTorch is installed,
    ``harness.targets.vulkan.local.latency``, which leaves the warm-up's out and takes the fastest
    process: one now and then runs a few per cent slow throughout); one without is timed from outside
    (:func:`time_runner`, the first process its warm-up). Returns (wall-clock latencies in ms, None
    where there are ETDumps; peak RSS; the ETDumps in ``workdir``)."""
    etdump = workdir / RUNNER_ETDUMP
    etdumps: list[Path] = []
    peak = 0
    for index in range(processes):
        etdump.unlink(missing_ok=True)
        peak = max(peak, execute(warmup + iterations)[1])
        if not (etdump.exists() and etdump.stat().st_size):
            break
        etdumps.append(etdump.rename(workdir / f"process-{index + 1}.etdump"))
    if etdumps:
        return None, peak, etdumps
    latencies, timed_peak = time_runner(execute, 0, iterations, repeats, failure)
    return latencies, max(peak, timed_peak), []


def _with_weights(pte: Path, workdir: Path) -> Path:
    """The program to run: ``pte`` itself, or a copy in ``workdir`` with its weights filled
    again where it was sent without them (a manifest beside it that lists any)."""
    manifest = pte.with_name(pte.stem + MANIFEST_SUFFIX)
    regions = json.loads(manifest.read_text()) if manifest.exists() else []
    if not regions:
        return pte
    program = bytearray(pte.read_bytes())
    refill(program, regions)
    runnable = workdir / pte.name
    runnable.write_bytes(program)
    return runnable


def list_programs(results: Path) -> list[Path]:
    """The programs under ``results/programs``, in the order they are run."""
    return sorted((Path(results) / "programs").glob("*/*.pte"))


def program_inputs(pte: Path) -> list[Path]:
    """A program's inputs as vulkan-run wrote them, in their order (input-0.bin, input-1.bin, ...)."""
    return _numbered(Path(pte).with_suffix(".inputs"), "input")


def run_programs(results: Path, runner: Path, out: Path, warmup: int, iterations: int, repeats: int,
                 processes: int, device_index: str | None = None) -> dict:
    """Every program under ``results/programs`` timed with ``runner``; the tar at ``out``;
    ``device_index``: ``$ETVK_DEVICE_INDEX``, which the runner reads too."""
    programs = list_programs(results)
    if not programs:
        raise SystemExit(f"remote_runner.py: no programs under {results / 'programs'}: run --target vulkan-run there first")
    summary = {"device": vulkan_device(device_index), "limits": vulkan_limits(device_index),
               "machine": platform.node(), "runner": str(runner),
               "runner_digest": hashlib.sha256(runner.read_bytes()).hexdigest()[:16], "made_by": "remote_runner.py",
               "settings": {"warmup": warmup, "iterations": iterations, "repeats": repeats, "processes": processes},
               "programs": {}}
    mode = {".xz": "w:xz", ".tar": "w"}.get(Path(out).suffix, "w:gz")  # xz: a quarter of gzip's size
    with tempfile.TemporaryDirectory() as scratch, tarfile.open(out, mode) as archive:
        for index, pte in enumerate(programs):
            name = str(pte.relative_to(results))
            workdir = Path(scratch) / str(index)
            workdir.mkdir()
            inputs = program_inputs(pte)
            runnable = _with_weights(pte, workdir)

            def execute(count: int) -> tuple[float, int]:
                return run_child(runner_command(runner, runnable, [str(p.resolve()) for p in inputs], count, workdir),
                                 workdir, f"executor_runner on {name}")

            try:
                latencies, peak, etdumps = run_timed(execute, workdir, warmup, iterations, repeats, processes)
            except RuntimeError as error:
                summary["programs"][name] = {"error": str(error)}
                print(f"remote_runner.py: {name}: {error}", file=sys.stderr)
                continue
            # outputs computed on refilled weights are no eager run's: null, not compared
            outputs = written_outputs(workdir) if runnable == pte else None
            summary["programs"][name] = {"latencies_ms": latencies, "peak_rss_bytes": peak,
                                         "etdump": bool(etdumps), "processes": len(etdumps) or 1,
                                         "outputs": None if outputs is None else len(outputs)}
            kept = [*zip(etdumps, etdump_paths(Path(name), len(etdumps))),
                    *zip(outputs or [], output_paths(Path(name), len(outputs or [])))]
            for written, place in kept:
                archive.add(written, str(place))
            timing = (f"{len(etdumps)} ETDumps written" if etdumps
                      else f"{statistics.median(latencies):.3f} ms (wall clock)")
            print(f"remote_runner.py: [{index + 1}/{len(programs)}] {name}: {timing}", file=sys.stderr, flush=True)
        listing = Path(scratch) / REMOTE_SUMMARY
        listing.write_text(json.dumps(summary, indent=1))
        archive.add(listing, REMOTE_SUMMARY)
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run every program of a results directory with an executor_runner.")
    parser.add_argument("results", type=Path)
    parser.add_argument("runner", type=Path)
    parser.add_argument("out", type=Path, help="the tar to write: gzipped, or as its name says (.tar.xz, .tar); "
                        "ETDumps compress well")
    parser.add_argument("--warmup", type=int, default=1, help="executions left out first, in the same process")
    parser.add_argument("--iterations", type=int, default=20, help="timed executions")
    parser.add_argument("--processes", type=int, default=3,
                        help="runner processes per program (a runner with the event tracer): the record is the "
                             "fastest one's")
    parser.add_argument("--repeats", type=int, default=3,
                        help="a runner without the event tracer (no ETDump) only: wall-clock timings taken")
    args = parser.parse_args(argv)
    run_programs(args.results.resolve(), args.runner.resolve(), args.out, args.warmup, args.iterations, args.repeats,
                 args.processes, os.environ.get("ETVK_DEVICE_INDEX"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
