"""Running an executor_runner as ``remote_runner.py`` does, here and on another machine
(Python alone, over a results directory's programs): one ETDump per runner process, and
timing from outside where a runner writes none."""

import gzip
import io
import json
import math
import os
import shutil
import stat
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import torch

from harness.results.results_dir import ResultsDir
from harness.results.store import RecordStore
from harness.targets.vulkan.local import runners
from harness.targets.vulkan.local.remote_import import import_remote
from harness.targets.vulkan.remote import remote_runner
from harness.targets.vulkan.remote.device import vulkan_limits
from harness.targets.vulkan.remote.remote_runner import RUNNER_ETDUMP, run_timed, time_runner

from .test_vulkan_run import stand_in_runner, xnnpack_program  # noqa: F401  (fixtures)


@pytest.mark.slow
def test_remote_script_times_every_program_of_a_results_directory(xnnpack_program, tmp_path, stand_in_runner):
    """remote_runner.py, as a plain script in a folder with only the modules beside it that it
    imports (device.py, weightless.py), on a results directory's programs; a program the runner
    cannot run is reported, not fatal."""
    path, exported = xnnpack_program
    good = tmp_path / "results" / "programs" / "m" / "s.pte"
    good.parent.mkdir(parents=True)
    shutil.copy(path, good)
    runners.ExecutorRunner.write_inputs(list(exported.example_inputs[0]), good.with_suffix(".inputs"))
    (good.parent / "broken.pte").write_bytes(b"not a program")
    device_side = tmp_path / "device-side"
    device_side.mkdir()
    for module in ("remote_runner.py", "device.py", "weightless.py"):
        shutil.copy(Path(remote_runner.__file__).with_name(module), device_side)
    script = device_side / "remote_runner.py"
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "results"), str(stand_in_runner),
                           str(tmp_path / "out.tar"), "--iterations", "2", "--repeats", "2"],
                          capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    with tarfile.open(tmp_path / "out.tar") as archive:
        summary = json.load(archive.extractfile("remote.json"))
        names = archive.getnames()
    run = summary["programs"]["programs/m/s.pte"]
    assert run["etdump"] and run["latencies_ms"] is None  # timed by the ETDumps' events, read at import
    assert run["processes"] == 3 and {"programs/m/s.etdump", "programs/m/s.2.etdump", "programs/m/s.3.etdump"} <= set(
        names)
    assert "exited with" in summary["programs"]["programs/m/broken.pte"]["error"]
    assert summary["settings"] == {"warmup": 1, "iterations": 2, "repeats": 2, "processes": 3}
    assert summary["limits"] == vulkan_limits()  # its device's, read as here (None without a driver)


def test_a_program_too_fast_to_time_from_outside_is_no_zero_latency():
    walls = iter([0.1, 0.30, 0.2, 0.2, 0.25, 0.3, 0.7])  # warm-up, then (1, N + 1) pairs; the first is noise
    latencies, _ = time_runner(lambda count: (next(walls), 1), warmup=1, iterations=4, repeats=3)
    assert latencies == pytest.approx([(0.25 - 0.2) / 4 * 1000, (0.7 - 0.3) / 4 * 1000])
    with pytest.raises(runners.RuntimeFailure, match="raise it"):
        time_runner(lambda count: (0.2, 1), 0, 20, 3, runners.RuntimeFailure)


def test_a_new_program_removes_its_own_stale_etdumps_only(tmp_path):
    from harness.targets.vulkan.local.runners import remove_program

    names = ["a.etdump", "a.2.etdump", "a.3.etdump", "a.py.Mine.etdump", "a.py.Mine.2.etdump", "a.pte", "b.etdump"]
    for name in names:
        (tmp_path / name).write_bytes(b"")
    remove_program(tmp_path / "a.pte")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names[3:5] + names[6:])


def test_processes_each_keep_their_etdump_where_the_runner_writes_one(tmp_path):
    counts = []

    def with_event_tracer(count):
        counts.append(count)
        (tmp_path / RUNNER_ETDUMP).write_bytes(b"events %d" % len(counts))
        return 0.5, len(counts)

    latencies, peak, etdumps = run_timed(with_event_tracer, tmp_path, warmup=2, iterations=5, repeats=3, processes=3)
    assert (latencies, peak, counts) == (None, 3, [7, 7, 7])
    assert [etdump.read_bytes() for etdump in etdumps] == [b"events 1", b"events 2", b"events 3"]
    walls = iter([0.5, 0.1, 0.3, 0.1, 0.3, 0.1, 0.3])

    def without(count):
        counts.append(count)
        return next(walls), 1

    counts.clear()
    latencies, _, etdumps = run_timed(without, tmp_path, warmup=2, iterations=5, repeats=3, processes=3)
    assert counts == [7, 1, 6, 1, 6, 1, 6] and not etdumps  # the first process was the warm-up
    assert latencies == pytest.approx([(0.3 - 0.1) / 5 * 1000] * 3)


def _program(tmp_path, name: str, strategy: str = "bfs-downstream") -> Path:
    """A Vulkan program of ``name`` with its inputs, where vulkan-run leaves them."""
    import strategies
    from harness.pipeline.model import pipeline
    from harness.targets.vulkan.compile.prefix import vulkan_lowering
    from harness.targets.vulkan.targets import write_program

    model = pipeline(name)
    lowered = vulkan_lowering(model).lower(strategies.get_strategy(strategy))
    return write_program(tmp_path / "results" / "programs" / name / f"{strategy}.pte", lowered, lowered.to_pte(),
                         model.exported.example_inputs[0])


def test_a_program_travels_without_its_weights_and_gets_random_ones_back(tmp_path):
    from harness.targets.vulkan.remote.weightless import REFILLED_TYPES, refill, strip

    original = _program(tmp_path, "synthetic_small").read_bytes()
    stripped, manifest = strip(original)
    weights = sum(region["size"] for region in manifest)
    assert len(stripped) == len(original) and weights > len(original) / 3
    assert {region["dtype"] for region in manifest} == {"FLOAT32"}
    outside = bytearray(original)
    for region in manifest:
        start, end = region["offset"], region["offset"] + region["size"]
        assert stripped[start:end] == bytes(region["size"])
        outside[start:end] = bytes(region["size"])
    assert stripped == bytes(outside) != original  # nothing but the weights changed
    refilled = bytearray(stripped)
    refill(refilled, manifest)
    for region in manifest:
        values = memoryview(refilled)[region["offset"]:region["offset"] + region["size"]].cast("f")
        assert len(set(values)) > min(100, len(values) // 2) and max(map(abs, values)) < 1
    assert set(REFILLED_TYPES) >= {"FLOAT32", "FLOAT16", "INT8"}


def test_an_int8_program_keeps_its_other_constants(tmp_path):
    from harness.targets.vulkan.remote.weightless import strip

    _, manifest = strip(_program(tmp_path, "synthetic_small.int8").read_bytes())
    assert {"INT8", "FLOAT32"} >= {region["dtype"] for region in manifest} >= {"INT8"}


def test_packed_programs_run_remotely_with_their_weights_refilled(tmp_path):
    """A pack holds each program stripped, its manifest, and one copy of identical inputs;
    remote_runner.py runs the programs with their weights filled again."""
    from harness.targets.vulkan.remote.packing import pack
    from harness.targets.vulkan.remote.remote_runner import _with_weights
    from harness.targets.vulkan.remote.weightless import MANIFEST_SUFFIX

    first = _program(tmp_path, "synthetic_small")
    _program(tmp_path, "synthetic_small", "all-width-packed")
    assert pack(tmp_path / "results", tmp_path / "pack.tar.xz") == 2
    with tarfile.open(tmp_path / "pack.tar.xz") as archive:
        members = {m.name: m for m in archive.getmembers()}
        archive.extractall(tmp_path / "remote", filter="data")
    inputs = [m for m in members.values() if ".inputs/" in m.name]
    assert len(inputs) == 2 and sum(m.islnk() for m in inputs) == 1
    assert (tmp_path / "pack.tar.xz").stat().st_size < first.stat().st_size / 2
    remote = tmp_path / "remote" / "programs" / "synthetic_small" / "bfs-downstream.pte"
    assert remote.with_name("bfs-downstream" + MANIFEST_SUFFIX).exists()
    runnable = _with_weights(remote, tmp_path)
    assert runnable != remote and runnable.stat().st_size == first.stat().st_size
    assert _with_weights(first, tmp_path) == first  # sent with its weights: run as it is


def _returned_as(tmp_path, name: str, summary, members: list[tuple[tarfile.TarInfo, bytes | None]] = ()) -> Path:
    """A tar at ``tmp_path / name`` holding ``members`` and ``summary`` as its remote.json."""
    path = tmp_path / name
    with tarfile.open(path, "w") as tar:
        for member, data in [*members, (tarfile.TarInfo("remote.json"), json.dumps(summary).encode())]:
            member.size = len(data or b"")
            tar.addfile(member, io.BytesIO(data) if data is not None else None)
    return path


def _contents(archive: Path) -> tuple[dict, list[tuple[tarfile.TarInfo, bytes]]]:
    """remote_runner.py's tar as its remote.json and its other members, with their bytes."""
    with tarfile.open(archive) as tar:
        return json.load(tar.extractfile("remote.json")), [
            (member, tar.extractfile(member).read()) for member in tar.getmembers() if member.name != "remote.json"]


def _link(name: str, kind: bytes, target: str) -> tuple[tarfile.TarInfo, None]:
    member = tarfile.TarInfo(name)
    member.type, member.linkname = kind, target
    return member, None


def _hostile(tmp_path, case: str, archive: Path) -> Path:
    """remote_runner.py's ``archive`` of the recorded programs' runs, tampered with or damaged as ``case`` says."""
    summary, etdumps = _contents(archive)
    etdump = etdumps[0][0].name
    if case == "truncated":
        packed = gzip.compress(archive.read_bytes())
        (tmp_path / "cut.tar.gz").write_bytes(packed[:len(packed) // 2])
        return tmp_path / "cut.tar.gz"
    if case == "three processes, one ETDump each":
        summary["settings"]["processes"] = 3
        for run in summary["programs"].values():
            run["processes"] = 3
        return _returned_as(tmp_path, "three.tar", summary, etdumps)
    members = {"outside": [(tarfile.TarInfo("../../tmp/x.etdump"), b"events")],
               "absolute link": [_link(etdump, tarfile.SYMTYPE, "/etc/passwd")],
               "link out": [_link(etdump, tarfile.SYMTYPE, "../../../../secret")],
               "hard link out": [_link(etdump, tarfile.LNKTYPE, "../../../secret")]}
    summaries = {"a list": [summary], "settings null": {**summary, "settings": None},
                 "programs a string": {**summary, "programs": "programs/synthetic_small/bfs-downstream.pte"},
                 "a billion outputs": {**summary, "programs": {name: {**run, "outputs": 10 ** 9}
                                                               for name, run in summary["programs"].items()}}}
    return _returned_as(tmp_path, "hostile.tar", summaries.get(case, summary), members.get(case, etdumps))


HOSTILE = [  # (what the archive is, what import-remote says of it after its path)
    ("outside", "holds what import-remote does not extract: '../../tmp/x.etdump' would be extracted to"),
    ("absolute link", "holds what import-remote does not extract: 'programs/synthetic_small/bfs-downstream.etdump' "
     "is a link to an absolute path"),
    ("link out", "holds what import-remote does not extract: 'programs/synthetic_small/bfs-downstream.etdump' would "
     "link to"),
    ("hard link out", "holds what import-remote does not extract: 'programs/synthetic_small/bfs-downstream.etdump' "
     "would link to"),
    ("truncated", "is damaged (EOFError: Compressed file ended before the end-of-stream marker was reached)"),
    ("a list", "is not as remote_runner.py or run.sh write it: remote.json is [{"),
    ("settings null", "is not as remote_runner.py or run.sh write it: remote.json's settings is null, not an object"),
    ("programs a string", "is not as remote_runner.py or run.sh write it: remote.json's programs is "
     '"programs/synthetic_small/bfs-downstr..., not an object'),
    ("a billion outputs", "is not as remote_runner.py or run.sh write it: its run of "
     "programs/synthetic_small/bfs-downstream.pte's outputs is 1000000000, not a whole number from 0 to 4096 or null"),
    ("three processes, one ETDump each", "lacks programs/synthetic_small/bfs-downstream.2.etdump (4 of the 6 "
     "files its remote.json promises are missing)"),
]


@pytest.mark.parametrize("case, message", HOSTILE, ids=[case for case, _ in HOSTILE])
def test_a_hostile_or_damaged_archive_is_refused_in_one_line_leaving_nothing(tmp_path, capsys, case, message):
    """What import-remote cannot trust is refused before anything is extracted or written: one line,
    exit 2; no records, links, ETDumps or scratch directory anywhere, an --out that existed as it was."""
    from harness import cli

    from .test_dispatches import _ran_elsewhere

    results, archive = _ran_elsewhere(tmp_path)
    hostile = _hostile(tmp_path, case, archive)
    import_remote(results, archive, tmp_path / "remote")
    before = {path: path.read_bytes() for path in tmp_path.rglob("*") if path.is_file()}
    assert cli.main(["import-remote", str(results), str(hostile), "--out", str(tmp_path / "remote")]) == 2
    said = capsys.readouterr().err.splitlines()
    assert len(said) == 1 and said[0].startswith(f"layoutbench: error: {hostile} {message}"), said[0]
    assert {path: path.read_bytes() for path in tmp_path.rglob("*") if path.is_file()} == before
    assert not (tmp_path.parent / "tmp" / "x.etdump").exists()


def test_an_import_into_earlier_records_replaces_their_programs_etdumps(tmp_path):
    """Imported where an earlier import wrote: each program's ETDumps are the new run's alone (none of
    the earlier run's extra processes is left to be read as this one's), the records are added."""
    from .test_dispatches import _ran_elsewhere

    results, archive = _ran_elsewhere(tmp_path)
    summary, etdumps = _contents(archive)
    summary["settings"]["processes"] = 2
    for run in summary["programs"].values():
        run["processes"] = 2
    second = [(tarfile.TarInfo(member.name.replace(".etdump", ".2.etdump")), data) for member, data in etdumps]
    two_processes = _returned_as(tmp_path, "two.tar", summary, [*etdumps, *second])
    out = tmp_path / "remote"
    import_remote(results, two_processes, out)
    assert len(list(out.rglob("*.2.etdump"))) == 2
    imported = import_remote(results, archive, out)
    assert not list(out.rglob("*.2.etdump")) and len(list(out.rglob("*.etdump"))) == 2
    assert RecordStore(out).read()[2:] == imported and len(RecordStore(out).read()) == 4
    assert [path.name for path in tmp_path.iterdir() if path.name.startswith(".")] == []


@pytest.mark.parametrize("run, reason", [
    ({"latencies_ms": [-5, math.nan, 1e308]}, "impossible latencies_ms: -5 ms, negative"),
    ({"latencies_ms": [2.0, math.nan, 3.0]}, "impossible latencies_ms: nan ms, not a number"),
    ({"latencies_ms": [-5, -7, -3]}, "impossible latencies_ms: -5 ms, negative"),
    ({"walls_ns": [[1, 1e30]]}, "impossible latency_ms_median: 5e+23 ms, more than an hour"),
    ({"walls_ns": [[math.nan, 2e9]]}, "impossible wall clock: nan ns, not a number"),
    ({"latencies_ms": [2.0], "peak_rss_bytes": -1}, "impossible peak_rss_bytes: -1 bytes, negative"),
    ({"latencies_ms": [2.0], "peak_rss_bytes": 1 << 60},
     f"impossible peak_rss_bytes: {1 << 60} bytes, more than 256 TiB"),
    # an earlier run.sh's wall clocks and peak bytes, still read: 2 s more for 2 inferences, 1000 ms each
    ({"walls_ns": [[1e9, 3e9]], "peak_rss_bytes": 2_411_724 * 1024}, None),
    ({"clocks_ns": [[5e9, 5e9 + 12, 6e9, 6e9 + 12], [-1, 0, 1, 2]]}, "impossible clocks_ns: -1 ns, negative"),
    ({"clocks_ns": [[5, 9, 9, 3]]}, "impossible wall clock: -6 ns, negative"),
    ({"latencies_ms": [2.0], "rss_kib": [5, math.nan]}, "impossible rss_kib: nan KiB, not a number"),
])
def test_an_impossible_figure_fails_its_record_with_the_reason(tmp_path, run, reason):
    """Latencies and wall clocks that no run measures (negative, not a number, an inference past an
    hour) and a peak memory below zero or past a 48-bit address space: that record failed, saying
    which figure and why; the other program's run is imported as it is."""
    from .test_dispatches import _ran_elsewhere

    results, archive = _ran_elsewhere(tmp_path)
    summary, etdumps = _contents(archive)
    summary["programs"]["programs/synthetic_small/bfs-downstream.pte"] = {
        "latencies_ms": None, "peak_rss_bytes": 1, "etdump": False, **run}
    imported = {r["strategy"]: r for r in import_remote(results, _returned_as(tmp_path, "r.tar", summary, etdumps),
                                                          tmp_path / "remote")}
    record = imported["bfs-downstream"]
    assert imported["all-width-packed"]["status"] == "ok"
    if reason is None:
        assert (record["status"], record["latency_ms_median"]) == ("ok", 1000)
        assert record["peak_rss_bytes"] == 2_411_724 * 1024
    else:
        assert (record["status"], record["reason"]) == ("failed", f"{reason}; run the program there again")
        assert record.get("latency_ms_median") is None


EAGER = torch.linspace(-4, 4, 10).reshape(1, 10)  # a classifier's logits
RANDOM_WEIGHTS = ("outputs not compared: the program ran with random weights in place of its own (sent weightless; "
                  "a run over adb and pack --weights send them)")


@pytest.mark.parametrize("returned, eager_kept, status, said", [
    (EAGER + 1e-4, True, "ok", None),
    (EAGER + 0.5, True, "failed", "outputs differ from eager PyTorch: max abs error 0.5 > tolerance 0.004 (on elsewhere)"),
    (EAGER[:, :5], True, "failed", "its outputs cannot be compared with eager PyTorch's: output 0 has 20 bytes, "
                                   "eager PyTorch's 40"),
    (None, True, "ok", RANDOM_WEIGHTS),
    (EAGER, False, "ok", "outputs not compared: no eager outputs were kept beside the program here"),
], ids=["within tolerance", "wrong", "cut short", "random weights", "no eager outputs"])
def test_outputs_that_came_back_are_held_to_eager_pytorch_s(tmp_path, returned, eager_kept, status, said):
    """The outputs of a program run elsewhere with its own weights, against eager's that vulkan-run
    kept beside it: within tolerance, the error in the record; beyond it or not comparable, the
    record failed, saying so; computed on random weights or with no eager outputs kept, not
    compared, and the note says why."""
    from .test_dispatches import _ran_elsewhere

    results, archive = _ran_elsewhere(tmp_path)
    name = "programs/synthetic_small/bfs-downstream.pte"
    if eager_kept:
        torch.save([EAGER], ResultsDir.beside(results / name, "eager_outputs"))
    summary, etdumps = _contents(archive)
    summary["programs"][name]["outputs"] = None if returned is None else 1
    outputs = [] if returned is None else [(tarfile.TarInfo(str(remote_runner.output_paths(Path(name), 1)[0])),
                                           returned.contiguous().numpy().tobytes())]
    record = {r["strategy"]: r for r in import_remote(
        results, _returned_as(tmp_path, "r.tar", summary, [*etdumps, *outputs]), tmp_path / "remote")}["bfs-downstream"]
    assert record["status"] == status
    kept = ResultsDir.beside(ResultsDir(tmp_path / "remote").program("synthetic_small", "bfs-downstream"),
                             "device_outputs")
    assert kept.is_dir() == (returned is not None)  # where ResultsDir names them, as remove_program does
    if status == "failed":
        assert record["reason"] == said
        return
    assert record["run_note"].endswith(said or "by remote_runner.py")
    compared = said is None
    assert (record["max_abs_error"] is not None, record["error_tolerance"] is not None) == (compared, compared)
    if compared:
        assert record["max_abs_error"] == pytest.approx(1e-4, rel=1e-2) and record["error_tolerance"] == 4e-3


def test_outputs_promised_and_missing_refuse_the_archive(tmp_path, capsys):
    from harness import cli

    from .test_dispatches import _ran_elsewhere

    results, archive = _ran_elsewhere(tmp_path)
    summary, etdumps = _contents(archive)
    summary["programs"]["programs/synthetic_small/bfs-downstream.pte"]["outputs"] = 2
    hollow = _returned_as(tmp_path, "r.tar", summary, etdumps)
    assert cli.main(["import-remote", str(results), str(hollow), "--out", str(tmp_path / "remote")]) == 2
    assert capsys.readouterr().err == (
        f"layoutbench: error: {hollow} lacks programs/synthetic_small/bfs-downstream.outputs/output-0.bin (2 of the 4 "
        f"files its remote.json promises are missing): pass the tar remote_runner.py wrote or the directory run.sh "
        "filled, whole\n")


def test_an_etdump_of_fewer_inferences_than_were_timed_fails_its_record(tmp_path):
    from .test_dispatches import _ran_elsewhere

    results, archive = _ran_elsewhere(tmp_path)
    summary, etdumps = _contents(archive)
    summary["settings"]["iterations"] = 5  # the kept ETDumps hold 3
    for record in import_remote(results, _returned_as(tmp_path, "r.tar", summary, etdumps), tmp_path / "remote"):
        assert record["status"] == "failed" and "holds 3 Method::execute events, fewer than the 5 timed" in record[
            "reason"]


def _filled_by_run_sh(tmp_path) -> tuple[Path, Path]:
    """A results directory of the recorded programs and a directory of their runs, as run.sh fills one."""
    from .test_dispatches import _ran_elsewhere

    results, archive = _ran_elsewhere(tmp_path)
    with tarfile.open(archive) as tar:
        tar.extractall(tmp_path / "returned", filter="data")
    return results, tmp_path / "returned"


@pytest.mark.parametrize("linked", ["programs/synthetic_small/bfs-downstream.etdump", "programs/synthetic_small",
                                    "remote.json"])
def test_a_link_in_run_shs_directory_is_refused_not_followed(tmp_path, capsys, linked):
    """A link in the directory run.sh filled could name any file here (a private one, which a copy would
    make readable by all): refused in one line, nothing written, wherever it points."""
    from harness import cli

    results, returned = _filled_by_run_sh(tmp_path)
    private = tmp_path / "private" / Path(linked).name
    private.parent.mkdir()
    (returned / linked).rename(private)
    (returned / linked).symlink_to(private)
    argv = ["import-remote", str(results), str(returned), "--out", str(tmp_path / "remote"), "--device", "a GPU"]
    assert cli.main(argv) == 2
    said = capsys.readouterr().err.splitlines()
    assert len(said) == 1 and "is, or lies behind, a link, and import-remote reads none" in said[0], said
    assert not (tmp_path / "remote").exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_an_etdump_copied_from_run_shs_directory_is_no_more_readable_than_there(tmp_path):
    results, returned = _filled_by_run_sh(tmp_path)
    for etdump in returned.rglob("*.etdump"):
        etdump.chmod(0o600)
    umask = os.umask(0o022)  # where a new file is readable by all
    try:
        import_remote(results, returned, tmp_path / "remote")
    finally:
        os.umask(umask)
    modes = {stat.S_IMODE(etdump.stat().st_mode) for etdump in (tmp_path / "remote").rglob("*.etdump")}
    assert modes == {0o600}
