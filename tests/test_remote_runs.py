"""Running an executor_runner as ``remote_runner.py`` does, here and on another machine
(Python alone, over a results directory's programs): one ETDump per runner process, and
timing from outside where a runner writes none."""

import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from harness.targets.vulkan import runners
from harness.targets.vulkan.device import vulkan_limits
from harness.targets.vulkan.remote_runner import RUNNER_ETDUMP, run_timed, time_runner

from .test_vulkan_run import stand_in_runner, xnnpack_program  # noqa: F401  (fixtures)


def test_remote_script_times_every_program_of_a_results_directory(xnnpack_program, tmp_path, stand_in_runner):
    """remote_runner.py, as a plain script (it imports nothing of ours but device.py), on a results
    directory's programs; a program the runner cannot run is reported, not fatal."""
    path, exported = xnnpack_program
    good = tmp_path / "results" / "programs" / "m" / "s.pte"
    good.parent.mkdir(parents=True)
    shutil.copy(path, good)
    runners.ExecutorRunner.write_inputs(list(exported.example_inputs[0]), good.with_suffix(".inputs"))
    (good.parent / "broken.pte").write_bytes(b"not a program")
    script = Path(runners.__file__).with_name("remote_runner.py")
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
    from harness.targets.vulkan.targets import remove_etdumps

    names = ["a.etdump", "a.2.etdump", "a.3.etdump", "a.py.Mine.etdump", "a.py.Mine.2.etdump", "a.pte", "b.etdump"]
    for name in names:
        (tmp_path / name).write_bytes(b"")
    remove_etdumps(tmp_path / "a.pte")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names[3:])


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
    from harness.targets.vulkan.prefix import vulkan_lowering
    from harness.targets.vulkan.targets import write_program

    model = pipeline(name)
    lowered = vulkan_lowering(model).lower(strategies.get_strategy(strategy))
    return write_program(tmp_path / "results" / "programs" / name / f"{strategy}.pte", lowered, lowered.to_pte(),
                         model.exported.example_inputs[0])


def test_a_program_travels_without_its_weights_and_gets_random_ones_back(tmp_path):
    from harness.targets.vulkan.weightless import REFILLED_TYPES, refill, strip

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
    from harness.targets.vulkan.weightless import strip

    _, manifest = strip(_program(tmp_path, "synthetic_small.int8").read_bytes())
    assert {"INT8", "FLOAT32"} >= {region["dtype"] for region in manifest} >= {"INT8"}


def test_packed_programs_run_remotely_with_their_weights_refilled(tmp_path):
    """A pack holds each program stripped, its manifest, and one copy of identical inputs;
    remote_runner.py runs the programs with their weights filled again."""
    from harness.targets.vulkan.remote_runner import _with_weights
    from harness.targets.vulkan.packing import pack
    from harness.targets.vulkan.weightless import MANIFEST_SUFFIX

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
