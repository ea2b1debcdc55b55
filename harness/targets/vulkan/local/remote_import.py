"""Records of programs run on another machine by ``harness/targets/vulkan/remote/remote_runner.py``
or by ``remote_runner.sh`` (``run.sh`` of a bundle, for a device without Python).

``run --target vulkan-run`` made the programs here (records, .pte, node maps, inputs); the
other machine ran them and sent back ETDumps, outputs and ``remote.json``, in a tar
(remote_runner.py) or a directory (run.sh). Each ok vulkan-run record becomes a record of that
machine: its latency (from its ETDumps' events, as vulkan-run reads them, else wall-clock
timings), peak memory and GPU time by node, with its Vulkan device, limits and runner in the
environment (so its identity is not the local record's). Outputs of a program run there with
its own weights are held to eager PyTorch's kept beside the program (``max_abs_error``; beyond
the tolerance the record fails, as vulkan-run's does); a program sent weightless computed on
random weights: its ``max_abs_error`` is None and ``run_note`` says why, as it says what the
other machine could not measure (run.sh without a ``time -v``: peak memory).
"""

import contextlib
import math
import os
import shutil
import tempfile
from pathlib import Path

import torch

from harness.errors import UsageError
from harness.results.provenance import identity_fields
from harness.results.results_dir import ResultsDir
from harness.results.schema import METRICS
from harness.results.store import RecordStore
from harness.targets.accuracy import OutputMismatch, max_abs_error, raw_outputs, tolerance, wrong_answer
from harness.targets.vulkan.local.dispatches import GPU_FIELDS, attributed_gpu_fields, prediction_error, read_node_map
from harness.targets.vulkan.local.latency import LATENCY_FIELDS, latency_fields
from harness.targets.vulkan.local.runners import remove_program
from harness.targets.vulkan.remote.remote_archive import returned
from harness.targets.vulkan.remote.remote_runner import (
    REMOTE_SUMMARY, etdump_paths, output_paths, wall_clock_latencies)

NS_PER_S = 1e9
RUN_FIELDS = (*LATENCY_FIELDS, "iterations", "peak_rss_bytes", "max_abs_error", "error_tolerance", *GPU_FIELDS,
              "attribution_error", "prediction_error")
# Past these a figure is no measurement: nothing a benchmark times takes an hour, and no process
# holds more resident than a 48-bit virtual address space (x86-64's and arm64's) can map.
MOST = {"ms": (3_600_000, "more than an hour"), "bytes": (1 << 48, "more than 256 TiB"),
        "KiB": (1 << 38, "more than 256 TiB"), "ns": (math.inf, "")}


def _impossible(name: str, values: list, unit: str) -> None:
    """Raise RuntimeError where one of ``values`` (the figure ``name``, in ``unit``) cannot have
    been measured: not a number, negative, or past :data:`MOST`."""
    most, past = MOST[unit]
    for value in values:
        why = "not a number" if math.isnan(value) else "negative" if value < 0 else past if value > most else None
        if why:
            raise RuntimeError(f"impossible {name}: {value!r} {unit}, {why}; run the program there again")


def _walls_and_peak(run: dict) -> tuple[list | None, float | None]:
    """A run's wall clocks (ns: of 1 and of iterations + 1 executions, a pair per repeat; None where
    it has none) and its peak memory (bytes, or None): from run.sh's clock readings and kilobytes
    as it read them (it computes nothing: mksh, Android's sh, computes in 32 bits), an earlier
    run.sh's wall clocks and bytes, or remote_runner.py's bytes."""
    walls, kib = run.get("walls_ns"), run.get("rss_kib")
    if run.get("clocks_ns"):
        _impossible("clocks_ns", [reading for readings in run["clocks_ns"] for reading in readings], "ns")
        walls = [(end - start, end_many - start_many) for start, end, start_many, end_many in run["clocks_ns"]]
    _impossible("rss_kib", kib or [], "KiB")
    return walls, max(kib) * 1024 if kib else run.get("peak_rss_bytes")


# Why a run's outputs are not compared, by what its remote.json says of them
NOT_COMPARED = {None: "the program ran with random weights in place of its own (sent weightless; a run over adb "
                      "and pack --weights send them)",
                "absent": "none came back (an earlier remote_runner.py or run.sh)"}


def _accuracy(run: dict, pte: Path, precision: str) -> dict:
    """``max_abs_error`` and ``error_tolerance`` of the outputs that came back for ``pte`` (placed in
    the import) against eager's kept beside it, or Nones and a ``run_note`` part saying why not."""
    eager = ResultsDir.beside(pte, "eager_outputs")
    count = run.get("outputs", "absent")
    why = NOT_COMPARED.get(count) or (None if eager.exists() else "no eager outputs were kept beside the program here")
    if why:
        return {"max_abs_error": None, "error_tolerance": None, "note": f"outputs not compared: {why}"}
    reference = torch.load(eager, weights_only=True)
    try:
        error = max_abs_error(raw_outputs(output_paths(pte, count), reference), reference)
    except OutputMismatch as mismatch:
        raise RuntimeError(f"its outputs cannot be compared with eager PyTorch's: {mismatch}") from None
    return {"max_abs_error": error, "error_tolerance": tolerance(reference, precision), "note": None}


def _measured(run: dict, summary: dict, pte: Path, precision: str) -> dict:
    """A run's measured record fields (the program ``pte`` placed in the import, its ETDumps and
    outputs beside it); RuntimeError where the run was too fast to time from outside, a figure is
    impossible or the outputs are wrong, ValueError where an ETDump holds fewer inferences than
    the settings timed."""
    iterations, latencies = summary["settings"]["iterations"], run.get("latencies_ms")
    walls, peak = _walls_and_peak(run)
    _impossible("latencies_ms", latencies or [], "ms")
    _impossible("peak_rss_bytes", [] if peak is None else [peak], "bytes")
    if walls:
        _impossible("wall clock", [wall for pair in walls for wall in pair], "ns")
        latencies = wall_clock_latencies([(one / NS_PER_S, many / NS_PER_S) for one, many in walls], iterations)
    note = f"run on {summary['machine']} ({summary['device']}) by {summary.get('made_by', 'remote_runner.py')}"
    if peak is None:
        why = summary.get("unknown", {}).get("peak_rss_bytes", "its time -v reported none")
        note += f"; peak memory not measured: {why}"
    # ETDumps came back where the runner has the event tracer, one per process: their events are
    # the latency (in a tar of the earlier remote.py too, one ETDump beside its wall-clock timings).
    etdumps = etdump_paths(pte, run.get("processes", 1)) if run["etdump"] else []
    accuracy = _accuracy(run, pte, precision)
    wrong = wrong_answer(accuracy)
    if wrong:
        raise RuntimeError(f"{wrong} (on {summary['machine']})")
    note = "; ".join(filter(None, [note, accuracy.pop("note")]))
    fields = {**latency_fields(etdumps, iterations, latencies), "iterations": iterations, "peak_rss_bytes": peak,
              **accuracy, "run_note": note}
    if run["etdump"]:
        fields.update(attributed_gpu_fields(ResultsDir.beside(pte, "etdump"), read_node_map(pte)))
        fields["prediction_error"] = prediction_error(fields)
    for name in RUN_FIELDS:
        if name in METRICS and METRICS[name].unit == "ms" and fields.get(name) is not None:
            _impossible(name, [fields[name]], "ms")
    return fields


def _remote_record(record: dict, run: dict, summary: dict, out: Path) -> dict:
    # That machine's device limits, or None where neither it nor --limits stated them (never this machine's).
    environment = {**record["environment"], "vulkan_device": summary["device"],
                   "vulkan_limits": summary.get("limits"), "machine": summary["machine"],
                   "runtime": f"executor_runner:{summary['runner_digest']}",
                   "run_settings": {**summary["settings"]}}
    fields = {k: v for k, v in record.items() if k not in RUN_FIELDS}
    fields.update(identity_fields(record["model"], record["model_digest"], record["strategy"],
                                  record["strategy_digest"], record["target"], environment, record["harness_digest"]))
    if "error" in run:
        fields.update(status="failed", reason=run["error"])
        return fields
    try:
        fields.update(_measured(run, summary, ResultsDir(out).program(record["model"], record["strategy"]),
                                record.get("precision", "float32")))
    except (RuntimeError, ValueError) as error:  # ValueError: an ETDump of fewer inferences than were timed
        fields.update(status="failed", reason=str(error))
    return fields


def program_name(record: dict) -> str:
    """A record's program as remote_runner.py names it: its path under the results directory."""
    return str(ResultsDir(".").program(record["model"], record["strategy"]))


def _with_device(summary: dict, archive: Path, device: str | None, limits) -> dict:
    """``summary`` with its device and its limits those stated, else its own; a one-line error
    where neither names the device."""
    summary = {**summary, "device": device or summary.get("device"),
               "limits": limits.to_json() if limits else summary.get("limits")}
    if not summary["device"]:
        why = summary.get("unknown", {}).get("device", f"its {REMOTE_SUMMARY} names none")
        raise UsageError(f"{archive} does not say which Vulkan device ran its programs ({why}): pass --device NAME")
    return summary


def _promised(summary: dict, names: list[str]) -> list[str]:
    """The ETDumps and outputs the runs of the programs ``names`` promise, where each is kept in the archive."""
    runs = [(Path(name), summary["programs"][name]) for name in names]
    return [str(place) for name, run in runs if "error" not in run
            for place in [*(etdump_paths(name, run.get("processes", 1)) if run["etdump"] else []),
                          *output_paths(name, run.get("outputs") or 0)]]


def _place(source: Path, target: Path, copy: bool) -> None:
    """``source`` at ``target``: a copy, or a link to it (the programs stay in the results
    directory they were made in; an import needs only their node maps, eager's outputs and what came back)."""
    if copy:
        shutil.copyfile(source, target)
    else:
        target.symlink_to(source.resolve())


@contextlib.contextmanager
def _staged(out: Path):
    """A new directory beside ``out`` that an import writes into: once it succeeded, renamed to
    ``out`` (or, where ``out`` exists, its files moved in and its records added); removed
    whatever happened, so a failed import leaves nothing."""
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is a file: name a directory")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.importing-", dir=out.parent))
    except OSError as error:
        raise UsageError(f"cannot write {out}: {error.strerror}") from None
    try:
        yield staging
        if out.exists():
            _merge(staging, out)
        else:
            staging.rename(out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _merge(staging: Path, out: Path) -> None:
    """An import written in ``staging`` into the results directory ``out``: each program it holds
    replaces the one there (with its node map, eager's outputs, ETDumps and outputs), and its records are added."""
    for program in staging.glob("programs/*/*.pte"):
        remove_program(out / program.relative_to(staging))
    for path in sorted(staging.rglob("*")):
        if path.is_dir() and not path.is_symlink() or path == ResultsDir(staging).records:
            continue
        (out / path.relative_to(staging)).parent.mkdir(parents=True, exist_ok=True)
        os.replace(path, out / path.relative_to(staging))
    store = RecordStore(out)
    for record in RecordStore(staging).read():
        store.append(record)


def import_remote(results: Path, archive: Path, out: Path, copy_programs: bool = False,
                  device: str | None = None, limits=None) -> list[dict]:
    """The records of ``archive`` (remote_runner.py's tar of ``results``' programs, or the directory
    run.sh filled) in ``out``; its programs and node maps linked there from ``results`` (copied with
    ``copy_programs``). ``device`` and ``limits`` (:class:`costmodel.device_limits.DeviceLimits`):
    the Vulkan device that ran them and what it allows, in place of what ``archive`` says.
    Nothing is written where it fails."""
    results, out, archive = Path(results), Path(out), Path(archive)
    if out.resolve() == results.resolve():
        raise UsageError("--out must be another directory than RESULTS: both machines' records are kept")
    with returned(archive, out) as came_back:
        summary = _with_device(came_back.summary, archive, device, limits)
        local = [r for r in RecordStore(results).latest(target="vulkan-run", status="ok")
                 if program_name(r) in summary["programs"]]
        if not local:
            raise UsageError(f"{archive} has no run of an ok vulkan-run record of {results}: was it made from it?")
        with _staged(out) as staging:
            for record in local:
                source = ResultsDir(results).program(record["model"], record["strategy"])
                target = ResultsDir(staging).program(record["model"], record["strategy"])
                for needed in (source, ResultsDir.beside(source, "node_map")):
                    if not needed.is_file():
                        raise UsageError(f"{needed} is missing: import into the results directory the archive's "
                                         "programs were packed from, as it was then")
                target.parent.mkdir(parents=True, exist_ok=True)
                _place(source, target, copy_programs)
                for kind in ("node_map", "eager_outputs"):  # eager's outputs where vulkan-run kept them
                    if ResultsDir.beside(source, kind).is_file():
                        _place(ResultsDir.beside(source, kind), ResultsDir.beside(target, kind), copy_programs)
            came_back.put(_promised(summary, [program_name(r) for r in local]), staging)
            store = RecordStore(staging)
            imported = [_remote_record(record, summary["programs"][program_name(record)], summary, staging)
                        for record in local]
            for record in imported:
                store.append(record)
    return imported
