"""Records of programs run on another machine by ``harness/targets/vulkan/remote_runner.py``
or by ``remote_runner.sh`` (``run.sh`` of a bundle, for a device without Python).

The programs were made here by ``run --target vulkan-run`` (records, .pte, node maps,
inputs); the other machine ran them and sent back ETDumps and ``remote.json``: in a tar
(remote_runner.py) or a directory (run.sh). Each ok vulkan-run record becomes a record of that
machine: its latency (from its ETDump's events, as vulkan-run reads them, else wall-clock
timings) and peak memory, GPU time attributed by node from its ETDump, its Vulkan device (with
its limits) and runner in the environment (so the identity differs from the local record's).
Outputs are not compared there: ``max_abs_error`` is None and ``run_note`` says so, as it says
what the other machine could not measure (run.sh without a ``time -v``: peak memory).
"""

import contextlib
import json
import shutil
import tarfile
from pathlib import Path

from harness.errors import UsageError
from harness.results.provenance import identity_fields
from harness.results.results_dir import ResultsDir
from harness.results.store import RecordStore, latest
from harness.targets.vulkan.dispatches import GPU_FIELDS, attributed_gpu_fields, prediction_error
from harness.targets.vulkan.latency import LATENCY_FIELDS, latency_fields
from harness.targets.vulkan.remote_runner import REMOTE_SUMMARY, etdump_paths, wall_clock_latencies
from harness.targets.vulkan.targets import read_node_map

MADE_BY = "the tar remote_runner.py wrote or the directory run.sh filled"
NS_PER_S = 1e9
RUN_FIELDS = (*LATENCY_FIELDS, "iterations", "peak_rss_bytes", "max_abs_error", "error_tolerance", *GPU_FIELDS,
              "attribution_error", "prediction_error")


def _remote_record(record: dict, run: dict, summary: dict, out: Path) -> dict:
    pte = ResultsDir(out).program(record["model"], record["strategy"])
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
    iterations = summary["settings"]["iterations"]
    latencies = run["latencies_ms"]
    if run.get("walls_ns"):  # run.sh's wall clocks of 1 and iterations + 1 executions, raw
        try:
            latencies = wall_clock_latencies([(one / NS_PER_S, many / NS_PER_S) for one, many in run["walls_ns"]],
                                             iterations)
        except RuntimeError as error:
            fields.update(status="failed", reason=str(error))
            return fields
    note = f"run on {summary['machine']} ({summary['device']}) by {summary.get('made_by', 'remote_runner.py')}"
    if run["peak_rss_bytes"] is None:
        note += f"; peak memory not measured: {summary.get('unknown', {}).get('peak_rss_bytes')}"
    # ETDumps came back where the runner has the event tracer, one per process: their events are
    # the latency (in a tar of the earlier remote.py too, one ETDump beside its wall-clock timings).
    etdumps = etdump_paths(pte, run.get("processes", 1)) if run["etdump"] else []
    fields.update(latency_fields(etdumps, iterations, latencies), iterations=iterations,
                  peak_rss_bytes=run["peak_rss_bytes"], max_abs_error=None, error_tolerance=None,
                  run_note=f"{note}; outputs not compared")
    if run["etdump"]:
        fields.update(attributed_gpu_fields(ResultsDir.beside(pte, "etdump"), read_node_map(pte)))
        fields["prediction_error"] = prediction_error(fields)
    return fields


def _name(record: dict) -> str:
    """A record's program as remote_runner.py names it: its path under the results directory."""
    return str(ResultsDir(".").program(record["model"], record["strategy"]))


def _summary(read, archive: Path, stated: dict) -> dict:
    """``remote.json`` (``read()`` opens it), its device and its limits those ``stated``, else its
    own, or a one-line error saying what ``archive`` is not or lacks."""
    try:
        with read() as member:
            summary = json.load(member)
    except (KeyError, ValueError, TypeError, AttributeError, OSError, tarfile.TarError):
        raise UsageError(f"{archive} holds no {REMOTE_SUMMARY} that remote_runner.py or run.sh wrote: pass "
                         f"{MADE_BY}, whole") from None
    summary["device"] = stated["device"] or summary.get("device")
    summary["limits"] = stated["limits"].to_json() if stated["limits"] else summary.get("limits")
    if not summary["device"]:
        why = summary.get("unknown", {}).get("device", f"its {REMOTE_SUMMARY} names none")
        raise UsageError(f"{archive} does not say which Vulkan device ran its programs ({why}): pass --device NAME")
    return summary


@contextlib.contextmanager
def _returned(archive: Path, stated: dict):
    """(``remote.json``, a function that puts the ETDumps into a results directory) of what came
    back: remote_runner.py's tar or the directory run.sh filled."""
    suffix = ResultsDir.PROGRAM_SUFFIXES["etdump"]
    if archive.is_dir():
        def copy_etdumps(out: Path) -> None:
            for etdump in (archive / "programs").glob(f"*/*{suffix}"):
                (out / etdump.parent.relative_to(archive)).mkdir(parents=True, exist_ok=True)
                shutil.copyfile(etdump, out / etdump.relative_to(archive))

        yield _summary(lambda: open(archive / REMOTE_SUMMARY, "rb"), archive, stated), copy_etdumps
        return
    try:
        tar = tarfile.open(archive)
    except FileNotFoundError:
        raise UsageError(f"archive {archive} does not exist: pass {MADE_BY}") from None
    except tarfile.TarError:
        raise UsageError(f"{archive} is not a tar archive: pass {MADE_BY}") from None
    except OSError as error:
        raise UsageError(f"cannot read archive {archive}: {error.strerror}") from None
    with tar:
        summary = _summary(lambda: tar.extractfile(REMOTE_SUMMARY), archive, stated)
        yield summary, lambda out: tar.extractall(
            out, members=[m for m in tar.getmembers() if m.name.endswith(suffix)], filter="data")


def _place(source: Path, target: Path, copy: bool) -> None:
    """``source`` at ``target``: a copy, or a link to it (the programs stay in the results
    directory they were made in; an import needs only their node maps and the ETDumps)."""
    target.unlink(missing_ok=True)
    if copy:
        shutil.copyfile(source, target)
    else:
        target.symlink_to(source.resolve())


def import_remote(results: Path, archive: Path, out: Path, copy_programs: bool = False,
                  device: str | None = None, limits=None) -> list[dict]:
    """The records of ``archive`` (remote_runner.py's tar of ``results``' programs, or the directory
    run.sh filled) in ``out``; its programs and node maps linked there from ``results`` (copied with
    ``copy_programs``). ``device`` and ``limits`` (:class:`costmodel.device_limits.DeviceLimits`):
    the Vulkan device that ran them and what it allows, in place of what ``archive`` says."""
    results, out, archive = Path(results), Path(out), Path(archive)
    if out.resolve() == results.resolve():
        raise UsageError("--out must be another directory than RESULTS: both machines' records are kept")
    with _returned(archive, {"device": device, "limits": limits}) as (summary, put_etdumps):
        local = [r for r in latest(RecordStore(results).read())
                 if r["target"] == "vulkan-run" and r["status"] == "ok" and _name(r) in summary["programs"]]
        for record in local:
            source = ResultsDir(results).program(record["model"], record["strategy"])
            target = ResultsDir(out).program(record["model"], record["strategy"])
            node_map = ResultsDir.beside(source, "node_map")
            for needed in (source, node_map):
                if not needed.is_file():
                    raise UsageError(f"{needed} is missing: import into the results directory the archive's "
                                     "programs were packed from, as it was then")
            target.parent.mkdir(parents=True, exist_ok=True)
            _place(source, target, copy_programs)
            _place(node_map, ResultsDir.beside(target, "node_map"), copy_programs)
        put_etdumps(out)
    store = RecordStore(out)
    imported = []
    for record in local:
        imported.append(_remote_record(record, summary["programs"][_name(record)], summary, out))
        store.append(imported[-1])
    if not imported:
        raise UsageError(f"{archive} has no run of an ok vulkan-run record of {results}: was it made from it?")
    return imported
