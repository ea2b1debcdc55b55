"""``--target vulkan-run``: runtime discovery, the runners, and the records they produce.

The pip wheel has no Vulkan runtime, so the runner code is exercised for real on an
XNNPACK program through the pybindings and through a stand-in executor_runner; a real
executor_runner is used when ``LAYOUTBENCH_ET_RUNNER`` names one.
"""

import dataclasses
import json
import os
import shutil
import statistics
import sys
from pathlib import Path

import pytest

import strategies
from harness import cli
from harness.targets.vulkan.local import runners
from harness.results.store import RecordStore
from harness.sweep.planning import run_sweep
from harness.sweep.execution import Execution
from harness.targets import MeasureContext
from harness.targets.accuracy import flat_outputs
from harness.pipeline.model import pipeline
from harness.targets.vulkan.compile.prefix import PREFIXES, prefix_key, vulkan_lowering

from harness.targets.vulkan.remote.remote_runner import etdump_paths

from .helpers.fake_executor_runner import WITHOUT_EVENT_TRACER
from .helpers.sweep_events import SweepEvents
from .helpers.user_strategies import waiting_for_a_cache_read
from .test_dispatches import inspector_times, tracer_gaps

SETTINGS = runners.RunSettings(warmup=1, iterations=3, repeats=2)


def assert_latency_is_the_timed_events_median(fields: dict, pte: Path, settings: runners.RunSettings) -> None:
    """The latency is the median timed Method::execute event (less its event tracer's logging)
    of the fastest of the runner processes whose ETDumps are kept beside the program."""
    processes = []
    for etdump in etdump_paths(pte, settings.processes):
        events, load = inspector_times(etdump)
        assert len(events) == settings.warmup + settings.iterations  # one process: warm-up and timed executions
        processes.append(([whole - tracer for whole, tracer in zip(events, tracer_gaps(etdump))][settings.warmup:], load))
    assert not etdump_paths(pte, settings.processes + 1)[-1].exists()
    timed, load = min(processes, key=lambda process: statistics.median(process[0]))
    assert fields["latency_source"] == "etdump"
    assert fields["latency_ms_median"] == pytest.approx(statistics.median(timed), rel=1e-9)
    assert (fields["latency_ms_min"], fields["latency_ms_max"]) == pytest.approx((min(timed), max(timed)), rel=1e-9)
    assert fields["latency_ms_min"] <= fields["latency_ms_p10"] <= fields["latency_ms_p90"] <= fields["latency_ms_max"]
    assert fields["load_ms"] == pytest.approx(load) and load > 0


@pytest.fixture
def runner_processes(monkeypatch) -> list[int]:
    """The executions (``--num_executions``) of every runner process vulkan-run starts, in order."""
    started = []
    start = runners.run_child

    def counting(command, *args):
        started.append(int(next(a for a in command if a.startswith("--num_executions=")).split("=")[1]))
        return start(command, *args)

    monkeypatch.setattr(runners, "run_child", counting)
    return started


@pytest.fixture(scope="module")
def xnnpack_program(tmp_path_factory):
    """synthetic_small lowered for XNNPACK (and portable kernels): a program the pip runtime runs."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    exported = pipeline("synthetic_small").exported
    program = to_edge_transform_and_lower(exported, partitioner=[XnnpackPartitioner()]).to_executorch()
    path = tmp_path_factory.mktemp("xnnpack") / "synthetic_small.pte"
    path.write_bytes(program.buffer)
    return path, exported


def test_without_a_runtime_records_are_skipped_with_the_reason(tmp_path, capsys, no_runtime):
    # In this process: a fork server started here would keep no_runtime's environment for later tests.
    code = cli.main(["compare", "--models", "resnet18", "--target", "vulkan-run", "--workers", "0",
                     "--strategies", "bfs-downstream,bfs-refined", "--out", str(tmp_path), "--format", "json"])
    captured = capsys.readouterr()
    assert code == 0
    records = json.loads(captured.out)
    assert [r["status"] for r in records] == ["skipped", "skipped"]
    assert all(r["reason"] == runners.NO_RUNTIME_REASON for r in records)
    assert f"skipped: {runners.NO_RUNTIME_REASON}" in captured.err
    assert "--et-runner" in runners.NO_RUNTIME_REASON


def test_asv_marks_inference_benchmarks_skipped_without_a_runtime(no_runtime, monkeypatch):
    from benchmarks import bench_vulkan_inference

    monkeypatch.setattr(bench_vulkan_inference.VulkanInference, "params", (["synthetic_small"], ["bfs-downstream"]))
    bench = bench_vulkan_inference.VulkanInference()
    records = bench.setup_cache()
    with pytest.raises(NotImplementedError, match="no ExecuTorch runtime with the Vulkan backend"):
        bench.setup(records, "synthetic_small", "bfs-downstream")


def test_a_bad_runner_path_is_one_clear_error(tmp_path, capsys):
    code = cli.main(["compare", "--models", "resnet18", "--target", "vulkan-run",
                     "--et-runner", str(tmp_path / "missing"), "--out", str(tmp_path)])
    assert code == 2
    assert "is not an executable file" in capsys.readouterr().err


@pytest.mark.slow
def test_pybindings_measure_a_real_program(xnnpack_program, tmp_path):
    path, exported = xnnpack_program
    fields = runners.run_program(runners.Pybindings(), path, exported.module(), exported.example_inputs[0],
                                 SETTINGS, tmp_path)
    assert fields["runtime"] == "pybindings"
    # its one process's ETDump, kept (the pybindings runtime runs a program in one process)
    assert_latency_is_the_timed_events_median(fields, path, dataclasses.replace(SETTINGS, processes=1))
    assert fields["iterations"] == 3
    assert 50e6 < fields["peak_rss_bytes"] < 8e9  # the child process: Python, torch, the program
    assert fields["max_abs_error"] < 1e-4 < fields["error_tolerance"]
    assert fields["gpu_dispatch_ms"] is None  # no node map: not an ET-VK program


@pytest.mark.slow
def test_a_wrong_answer_is_measured_as_such(xnnpack_program, tmp_path):
    path, exported = xnnpack_program

    def off_by_one(*inputs):
        return [t + 1 for t in flat_outputs(exported.module()(*inputs))]

    fields = runners.run_program(runners.Pybindings(), path, off_by_one, exported.example_inputs[0], SETTINGS, tmp_path)
    assert fields["max_abs_error"] == pytest.approx(1.0, abs=1e-4)
    assert fields["max_abs_error"] > fields["error_tolerance"]


def _stand_in(directory: Path, environment: str = "") -> Path:
    """An executable with executor_runner's flags (tests/helpers/fake_executor_runner.py)."""
    wrapper = directory / "bin" / "executor_runner"
    wrapper.parent.mkdir()
    stand_in = os.path.join(os.path.dirname(__file__), "helpers", "fake_executor_runner.py")
    wrapper.write_text(f"#!/bin/sh\n{environment}exec {sys.executable} {stand_in} \"$@\"\n")
    wrapper.chmod(0o755)
    return wrapper


@pytest.fixture
def stand_in_runner(tmp_path) -> Path:
    """A runner built with the event tracer: it writes an ETDump."""
    return _stand_in(tmp_path)


@pytest.mark.slow
def test_executor_runner_driver_with_a_stand_in(xnnpack_program, tmp_path, stand_in_runner, runner_processes):
    """Runner processes of warm-up and timed executions; the latency is the fastest one's median
    timed Method::execute event, from the ETDumps kept beside the program."""
    path, exported = xnnpack_program
    for stale in etdump_paths(path, SETTINGS.processes):
        stale.unlink(missing_ok=True)
    fields = runners.run_program(runners.ExecutorRunner(str(stand_in_runner)), path, exported.module(),
                                 exported.example_inputs[0], SETTINGS, tmp_path / "work")
    assert runner_processes == [SETTINGS.warmup + SETTINGS.iterations] * SETTINGS.processes
    assert fields["runtime"] == "executor_runner"
    assert fields["max_abs_error"] < 1e-4 and fields["peak_rss_bytes"] > 0
    assert_latency_is_the_timed_events_median(fields, path, SETTINGS)
    assert fields["graph_execute_ms"] is None  # an XNNPACK program: no ET-VK events
    assert fields["transition_time_share"] is None  # no node map: not an ET-VK program


@pytest.mark.slow
def test_a_runner_without_the_event_tracer_is_timed_by_wall_clock(xnnpack_program, tmp_path, runner_processes):
    """No ETDump: the process that ran warm-up and timed executions was the warm-up, then
    (wall(N + 1) - wall(1)) / N per repeat; the record says its latency is a wall clock's."""
    path, exported = xnnpack_program
    runner = _stand_in(tmp_path, f"export {WITHOUT_EVENT_TRACER}=1\n")  # it would exit on --etdump_path
    settings = runners.RunSettings(warmup=1, iterations=2, repeats=1)
    fields = runners.run_program(runners.ExecutorRunner(str(runner)), path, exported.module(),
                                 exported.example_inputs[0], settings, tmp_path / "work")
    assert runner_processes == [3, 1, 3]
    assert fields["latency_source"] == "wall-clock" and fields["load_ms"] is None
    assert fields["latency_ms_median"] > 0
    assert not (tmp_path / "work" / "model.etdump").exists()


@pytest.mark.slow
def test_relative_paths_reach_the_runner_absolute(xnnpack_program, tmp_path, monkeypatch, stand_in_runner):
    """The runner starts in its work directory; a relative program path (a relative results
    directory, the default) must still name the program."""
    path, exported = xnnpack_program
    (tmp_path / "results").mkdir()
    shutil.copy(path, tmp_path / "results" / "program.pte")
    monkeypatch.chdir(tmp_path)
    fields = runners.run_program(runners.ExecutorRunner(str(stand_in_runner)), Path("results/program.pte"),
                                 exported.module(), exported.example_inputs[0], SETTINGS, Path("work"))
    assert fields["max_abs_error"] < 1e-4


def test_a_runner_on_path_or_in_the_cache_needs_no_flag(monkeypatch, tmp_path, stand_in_runner, no_runtime):
    monkeypatch.setenv("PATH", f"{stand_in_runner.parent}:{os.environ['PATH']}")
    assert runners.find_runtime(None).path == stand_in_runner
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.setenv("LAYOUTBENCH_CACHE_DIR", str(tmp_path / "cache"))
    assert runners.find_runtime(None) is None
    runners.cached_runner().parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(stand_in_runner, runners.cached_runner())
    assert runners.find_runtime(None).path == runners.cached_runner()


@pytest.mark.slow
def test_runtime_failure_is_a_failed_record_and_the_program_is_kept(tmp_path, monkeypatch):
    # The pybindings have no VulkanBackend, so loading the ET-VK program fails in the child.
    monkeypatch.setattr("harness.targets.vulkan.targets.find_runtime", lambda et_runner, from_environment: runners.Pybindings())
    records = run_sweep(["synthetic_small"], ["bfs-downstream"], "vulkan-run", RecordStore(tmp_path),
                        context=MeasureContext(tmp_path, run_settings=SETTINGS),
                        execution=Execution(workers=0)).records  # in this process, where the patch is
    assert records[0]["status"] == "failed"
    assert records[0]["reason"].startswith("the pybindings runtime exited with")
    assert records[0]["transitions"] >= 0  # the layout metrics are kept beside the failure
    assert (tmp_path / "programs" / "synthetic_small" / "bfs-downstream.pte").stat().st_size > 0


@pytest.mark.slow
def test_no_worker_loads_early_beside_a_timed_run(tmp_path, monkeypatch, stand_in_runner):
    """vulkan-run times programs: the next model's worker reads nothing (not even a cached
    prefix) until the model before it has finished: the first measurement waits 5 s for a
    read that does not come, and when the sweep has the first model's record the next
    model's prefix is still unread."""
    models = ["synthetic_small", "synthetic:12"]
    for model in models:
        vulkan_lowering(pipeline(model))  # in the cache
    entry = PREFIXES.path(prefix_key(models[1]))
    log = waiting_for_a_cache_read(monkeypatch, tmp_path, entry, wait_seconds=5)
    unread = entry.stat().st_mtime
    read_by_first_record = []
    events = SweepEvents(on_record=lambda record: read_by_first_record.append(entry.stat().st_mtime != unread))
    results = tmp_path / "results"
    sweep = run_sweep(models, ["tests.helpers.user_strategies:WaitsForACacheRead"], "vulkan-run", RecordStore(results), events,
                      context=MeasureContext(results, et_runner=str(stand_in_runner), run_settings=SETTINGS),
                      execution=Execution(workers=1))
    assert [r["model"] for r in sweep.records] == models, [r["reason"] for r in sweep.records]
    assert log.read_text() == "unread\n"
    assert read_by_first_record[0] is False
    first_done = events.index(("record", models[0], "tests.helpers.user_strategies:WaitsForACacheRead"))
    assert events.index(("stage", f"{models[1]}: building the model")) > first_done


@pytest.fixture
def real_runner():
    """An executor_runner wherever one is found (flag aside: env, PATH, the cache)."""
    runtime = runners.find_runtime(None, os.environ.get(runners.RUNNER_ENV))
    if not isinstance(runtime, runners.ExecutorRunner):
        pytest.skip(f"no executor_runner here: {runners.NO_RUNTIME_REASON}")
    return runtime


def test_real_runtime_with_a_relative_results_directory(tmp_path, monkeypatch, real_runner, capsys):
    monkeypatch.chdir(tmp_path)
    code = cli.main(["run", "--models", "synthetic_small", "--strategies", "bfs-downstream,all-width-packed",
                     "--target", "vulkan-run", "--out", "results", "--iterations", "2", "--format", "json"])
    records = json.loads(capsys.readouterr().out)
    assert code == 0
    for record in records:
        assert record["status"] == "ok", record["reason"]
        assert record["runtime"] == "executor_runner"
        assert record["environment"]["vulkan_device"]
        assert record["max_abs_error"] <= record["error_tolerance"]
        assert 0 < record["transition_gpu_ms"] < record["gpu_dispatch_ms"]
        pte = Path("results/programs/synthetic_small") / f"{record['strategy']}.pte"
        assert_latency_is_the_timed_events_median(record, pte, runners.RunSettings(warmup=1, iterations=2))
        assert 0 < record["graph_execute_ms"] < record["latency_ms_median"]


def test_real_runtime_profile_and_remote_round_trip(tmp_path, real_runner, capsys):
    results = tmp_path / "results"
    code = cli.main(["profile", "synthetic_small", "--strategy", "bfs-downstream", "--vs", "all-width-packed",
                     "--out", str(results), "--iterations", "2", "--format", "json"])
    result = json.loads(capsys.readouterr().out)
    assert code == 0
    assert result["summary"]["transitions"] == 9 and result["vs_summary"]["transitions"] == 13
    assert result["summary"]["latency_source"] == "etdump" and result["summary"]["load_ms"] > 0
    assert (results / "profile-synthetic_small-bfs-downstream-vs-all-width-packed.png").stat().st_size > 0

    from harness.targets.vulkan.local.remote_import import import_remote
    from harness.targets.vulkan.remote.remote_runner import run_programs

    run_programs(results, real_runner.path, tmp_path / "remote.tar", warmup=1, iterations=2, repeats=2, processes=2)
    imported = import_remote(results, tmp_path / "remote.tar", tmp_path / "remote")
    assert {r["strategy"] for r in imported} == {"bfs-downstream", "all-width-packed"}
    local = {r["strategy"]: r for r in RecordStore(results).read()}
    for record in imported:  # the programs ran with their weights: their outputs came back, held to eager's
        assert record["status"] == "ok" and record["max_abs_error"] <= record["error_tolerance"]
        assert record["identity"] != local[record["strategy"]]["identity"]
        assert record["transitions"] == local[record["strategy"]]["transitions"]
        assert 0 < record["transition_time_share"] < 1
        pte = tmp_path / "remote" / "programs" / "synthetic_small" / f"{record['strategy']}.pte"
        assert_latency_is_the_timed_events_median(record, pte, runners.RunSettings(warmup=1, iterations=2,
                                                                                   processes=2))


def test_real_runtime_runs_every_strategy_on_a_model_of_several_partitions(tmp_path, real_runner, capsys):
    """Three Vulkan partitions with CPU operators between them: every built-in strategy's
    program runs, with its latency and its GPU time attributed to the nodes of each partition."""
    from harness.targets.vulkan.local.dispatches import program_dispatches

    code = cli.main(["run", "--models", "synthetic_partitioned", "--strategies", "all", "--target", "vulkan-run",
                     "--out", str(tmp_path), "--iterations", "1", "--processes", "1", "--format", "json"])
    records = json.loads(capsys.readouterr().out)
    assert code == 0 and {r["strategy"] for r in records} == set(strategies.list_strategies())
    for record in records:
        assert record["status"] == "ok", record["reason"]
        assert (record["partitions"], record["ops_outside_delegate"]) == (3, 2)
        assert record["latency_ms_median"] > 0 and record["attribution_error"] is None
        assert record["gpu_dispatch_ms"] > record["staging_gpu_ms"] > 0
        dispatches = program_dispatches(tmp_path / "programs" / "synthetic_partitioned" / f"{record['strategy']}.pte")
        assert sorted(dispatches["partition"].unique()) == [0, 1, 2]
        transitions = dispatches.loc[dispatches["transition"], ["partition", "node"]]
        assert len(transitions.drop_duplicates()) == record["transitions"]


def test_a_vulkan_run_record_is_reused_only_with_its_files(tmp_path):
    """profile and costs read the program, node map and ETDump beside a record: a record
    (from this directory or the record cache) whose files are not here is measured again."""
    from harness.results.results_dir import ResultsDir
    from harness.targets import get_target

    target, context = get_target("vulkan-run"), MeasureContext(tmp_path)
    record = {"model": "m", "strategy": "s", "latency_source": "etdump"}
    assert not target.reusable(record, context)
    pte = ResultsDir(tmp_path).program("m", "s")
    pte.parent.mkdir(parents=True)
    for suffix in (".pte", ".nodes.json"):
        pte.with_suffix(suffix).write_bytes(b"kept")
    assert not target.reusable({**record, "latency_source": "wall-clock"}, context)  # eager's outputs are gone
    pte.with_suffix(".eager.pt").write_bytes(b"kept")
    assert not target.reusable(record, context)  # its ETDump is gone
    assert target.reusable({**record, "latency_source": "wall-clock"}, context)  # a runner without the event tracer
    pte.with_suffix(".etdump").write_bytes(b"kept")
    assert target.reusable(record, context)
