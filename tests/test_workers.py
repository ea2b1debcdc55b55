"""Each model is measured in a worker process: a crash, a kill or a limit there fails the
measurement it hit, names the signal or the limit, and the sweep goes on."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from harness.sweep.events import BuildingModel, Measuring, Recorded
from harness.sweep.job import Job, run_job
from harness.pipeline.model import pipeline
from harness.targets.vulkan.compile.prefix import PREFIXES, prefix_key, vulkan_lowering
from harness.sweep.planning import run_sweep
from harness.sweep.execution import Execution
from harness.sweep.workers import JobTracker, crash_site, crashed
from harness.results.results_dir import ResultsDir
from harness.results.store import RecordStore

from .helpers.streams import lines_of, rest_of, wait_for_line
from .helpers.sweep_events import SweepEvents
from .helpers.user_strategies import waiting_for_a_cache_read

ABORTS = "tests.helpers.user_strategies:Aborts"
HANGS = "tests.helpers.user_strategies:Hangs"
WAITS = "tests.helpers.user_strategies:WaitsForACacheRead"
MODELS = ["synthetic_small", "synthetic:12"]


def _by_key(records):
    return {(r["model"], r["strategy"]): r for r in records}


def test_an_abort_fails_its_measurement_and_the_sweep_goes_on(tmp_path):
    store = RecordStore(tmp_path)
    sweep = run_sweep(MODELS, [ABORTS, "bfs-downstream"], "vulkan", store, fresh=True,
                      execution=Execution(workers=2))
    records = _by_key(store.read())
    assert len(records) == 4 and len(sweep.measured) == 4
    for model in MODELS:
        crashed, after = records[(model, ABORTS)], records[(model, "bfs-downstream")]
        assert crashed["status"] == "failed"
        assert crashed["reason"].startswith("worker killed by SIGABRT in tests/helpers/user_strategies.py:")
        assert crashed["reason"].endswith(f"while measuring {ABORTS}")
        assert crashed["identity"]  # the failed record keeps the identity it was planned with
        assert "Fatal Python error: Aborted" in open(crashed["log"]).read()
        assert crashed["repeatable"] is True  # the same code would crash again
        assert after["status"] == "ok" and after["transitions"] >= 0
    again = run_sweep(MODELS, [ABORTS, "bfs-downstream"], "vulkan", store, execution=Execution(workers=2))
    assert len(again.measured) == 0 and len(again.reused) == 4  # a repeatable crash is not paid twice


@pytest.mark.slow
def test_a_time_limit_fails_the_stuck_measurement_only(tmp_path):
    store = RecordStore(tmp_path)
    run_sweep(["synthetic_small"], [HANGS, "bfs-downstream"], "vulkan", store, fresh=True,
              execution=Execution(workers=1, time_limit=30))
    records = _by_key(store.read())
    assert records[("synthetic_small", HANGS)]["reason"] == f"time limit of 30 s reached while measuring {HANGS}"
    assert records[("synthetic_small", HANGS)]["repeatable"] is False  # a limit says nothing of the code
    assert records[("synthetic_small", "bfs-downstream")]["status"] == "ok"


def test_a_memory_limit_fails_the_greedy_measurement_only(tmp_path):
    store = RecordStore(tmp_path)
    run_sweep(["synthetic_small"], ["tests.helpers.user_strategies:HoldsMemory", "bfs-downstream"], "vulkan", store,
              fresh=True, execution=Execution(workers=1, memory_limit=int(2.5 * 2**30)))
    records = _by_key(store.read())
    reason = records[("synthetic_small", "tests.helpers.user_strategies:HoldsMemory")]["reason"]
    assert reason.startswith("memory limit of 2.5 GiB exceeded (") and reason.endswith(
        "GiB resident) while measuring tests.helpers.user_strategies:HoldsMemory")
    assert records[("synthetic_small", "bfs-downstream")]["status"] == "ok"


def test_an_asv_set_up_sweep_survives_an_abort(monkeypatch):
    from benchmarks import bench_vulkan_layout

    monkeypatch.setattr(bench_vulkan_layout.VulkanLayout, "params", (["synthetic_small"], [ABORTS, "bfs-downstream"]))
    bench = bench_vulkan_layout.VulkanLayout()
    records = bench.setup_cache()
    bench.setup(records, "synthetic_small", "bfs-downstream")
    assert bench.track_transitions(records, "synthetic_small", "bfs-downstream") == 9
    with pytest.raises(NotImplementedError, match="worker killed by SIGABRT"):
        bench.setup(records, "synthetic_small", ABORTS)


def test_the_next_worker_loads_its_cached_model_while_the_one_before_it_measures(tmp_path, monkeypatch):
    """--workers 1: the next model's prefix is read from the cache while the model before
    it measures (that measurement waits until it is), and its own measurement waits for its
    turn (the sweep hears it build its model only after the model before has its record)."""
    for model in MODELS:
        vulkan_lowering(pipeline(model))  # in the cache
    log = waiting_for_a_cache_read(monkeypatch, tmp_path, PREFIXES.path(prefix_key(MODELS[1])), wait_seconds=600)
    events = SweepEvents()
    sweep = run_sweep(MODELS, [WAITS], "vulkan", RecordStore(tmp_path), events, fresh=True,
                      execution=Execution(workers=1))
    assert [r["status"] for r in sweep.records] == ["ok", "ok"]
    assert log.read_text() == "read\n", "loaded early"
    first_done = events.index(("record", MODELS[0], WAITS))
    assert events.index(("stage", f"{MODELS[1]}: building the model")) > first_done, "measured in its turn"


@pytest.mark.slow
def test_each_record_has_its_workers_peak_memory_and_a_strategy_frees_what_it_held(tmp_path):
    """One worker, three strategies of a model with 64 MiB of weights: a strategy that kept
    its lowering alive would add about twice that to the next one's peak."""
    sweep = run_sweep(["tests.helpers.user_models:wide_linear"], ["bfs-downstream", "bfs-refined", "ilp"], "vulkan",
                      RecordStore(tmp_path), fresh=True, execution=Execution(workers=1))
    peaks = [r["worker_peak_rss_bytes"] for r in sweep.records]
    assert [r["status"] for r in sweep.records] == ["ok"] * 3
    assert all(peak > 64 << 20 for peak in peaks)
    assert max(peaks) - peaks[0] < 16 << 20, [peak >> 20 for peak in peaks]


def test_a_crash_while_building_the_model_fails_every_strategy_left():
    job = Job("m", "vulkan", ["a", "b"], {}, {})
    tracker = JobTracker(job)
    tracker.on(BuildingModel("m"))
    events, rest = tracker.ended("worker killed by SIGSEGV", repeatable=True)
    assert [e.record["strategy"] for e in events] == ["a", "b"] and rest is None
    assert all(e.record["repeatable"] for e in events)
    assert events[0].record["reason"] == "worker killed by SIGSEGV while building the model (export, lowering prefix)"
    tracker = JobTracker(job)
    for event in [BuildingModel("m"), Measuring("m", "vulkan", "a"), Recorded({"strategy": "a"}),
                  Measuring("m", "vulkan", "b")]:
        tracker.on(event)
    events, rest = tracker.ended("worker killed by SIGKILL")
    assert [e.record["strategy"] for e in events] == ["b"] and rest is None
    assert events[0].record["repeatable"] is False


def test_only_a_crash_of_the_workers_own_code_repeats():
    assert [crashed(-s) for s in (signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS)] == [True, True, True]
    assert [crashed(code) for code in (-signal.SIGKILL, -signal.SIGTERM, 1, 0, None)] == [False] * 5


def test_the_crash_site_is_read_from_faulthandler(tmp_path):
    log = tmp_path / "crash.log"
    log.write_text('Fatal Python error: Segmentation fault\n\n'
                   'Thread 0x2 (most recent call first):\n'
                   '  File "/x/lib/python3.11/threading.py", line 331 in wait\n\n'
                   'Current thread 0x1 (most recent call first):\n'
                   '  File "/x/lib/python3.11/site-packages/ethosu/vela/vela.py", line 137 in process_regor\n'
                   '  File "/x/lib/python3.11/site-packages/ethosu/vela/vela.py", line 400 in main\n')
    assert crash_site(log) == "ethosu/vela/vela.py:137 (process_regor)"
    assert crash_site(tmp_path / "missing.log") is None


@pytest.mark.parametrize("workers", [1, 0])
def test_isolated_and_in_process_sweeps_agree(tmp_path, workers):
    isolated = run_sweep(["synthetic_small"], ["bfs-downstream", "all-width-packed"], "vulkan",
                         RecordStore(tmp_path / "a"), fresh=True, execution=Execution(workers=workers)).records
    assert [(r["strategy"], r["status"], r["transitions"]) for r in isolated] == [
        ("bfs-downstream", "ok", 9), ("all-width-packed", "ok", isolated[1]["transitions"])]


@pytest.mark.slow
@pytest.mark.parametrize("kill", [signal.SIGTERM, signal.SIGKILL])
def test_a_killed_sweep_leaves_no_worker_behind(tmp_path, kill):
    command = [sys.executable, "-m", "harness.cli", "run", "--models", "synthetic_small", "--strategies",
               f"bfs-downstream,{HANGS}", "--workers", "1", "--out", str(tmp_path)]
    sweep = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    stderr = lines_of(sweep.stderr)
    store = RecordStore(tmp_path)
    # the progress line of the first record (the hanging strategy's measurement has begun or follows)
    assert wait_for_line(stderr, "synthetic_small / bfs-downstream: ok", timeout=300)
    assert [r["status"] for r in store.read()] == ["ok"]
    workers = psutil.Process(sweep.pid).children(recursive=True)
    assert workers
    sweep.send_signal(kill)
    sweep.wait(timeout=60)
    if kill == signal.SIGTERM:
        assert sweep.returncode == 130
        assert wait_for_line(stderr, "interrupted; finished records are kept", timeout=60)
    gone, alive = psutil.wait_procs(workers, timeout=15)
    assert not alive
    rest = rest_of(stderr, timeout=30)
    assert not [line for line in rest if "Traceback" in line], "".join(rest)
    assert len(store.read()) == 1
    if kill == signal.SIGKILL:  # the sweep had no chance to remove its workers' logs: the next one does
        subprocess.run(command[:-1] + [str(tmp_path), "--strategies", "bfs-downstream"], capture_output=True,
                       timeout=300, check=True)
    assert not ResultsDir(tmp_path).worker_crash_logs(), "no worker's empty crash log is left"


@pytest.mark.slow
def test_ctrl_c_is_one_line_from_the_command_and_none_from_its_workers(tmp_path):
    """The terminal sends Ctrl-C to the command's whole process group: the sweep, its fork
    server and its workers; only the sweep answers."""
    command = [sys.executable, "-m", "harness.cli", "run", "--models", "synthetic_small", "--strategies",
               f"bfs-downstream,{HANGS}", "--workers", "1", "--out", str(tmp_path), "--fresh"]
    # As a terminal starts it: Ctrl-C at its default, whatever the test runner ignores (a runner
    # started in the background by a script ignores it, and so would the command it starts).
    sweep = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                             start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        stderr = lines_of(sweep.stderr)
        assert wait_for_line(stderr, "synthetic_small / bfs-downstream: ok", timeout=300)
        workers = psutil.Process(sweep.pid).children(recursive=True)
        for process in workers:  # each ignores it (else it may print a traceback before the sweep ends it)
            ignored = int(Path(f"/proc/{process.pid}/status").read_text().split("SigIgn:")[1].split()[0], 16)
            assert ignored & 1 << (signal.SIGINT - 1), process.cmdline()
        os.killpg(sweep.pid, signal.SIGINT)
        sweep.wait(timeout=60)
    finally:  # a failed check leaves no sweep hanging for ever
        if sweep.poll() is None:
            os.killpg(sweep.pid, signal.SIGKILL)
    assert sweep.returncode == 130
    psutil.wait_procs(workers, timeout=15)
    rest = rest_of(stderr, timeout=30)
    assert rest == ["layoutbench: interrupted; finished records are kept, re-run to resume\n"], rest
    assert not ResultsDir(tmp_path).worker_crash_logs()


def test_a_worker_running_other_code_than_planned_fails_the_record():
    job = Job("synthetic_small", "vulkan", ["bfs-downstream"], {"bfs-downstream": {"strategy_digest": "0" * 16}}, {})
    sent = []
    run_job(job, sent.append)
    record = sent[-1].record
    assert record["status"] == "failed" and record["strategy_digest"] == "0" * 16
    assert record["reason"].startswith("the strategy's code here (digest ") and "planned for (digest 0000" in record["reason"]


# A worker, forked by the fork server, reading its job from a sweep killed (SIGKILL) a moment
# before: multiprocessing's spawn._main meets an empty pipe.
ORPHANED_START = """
import multiprocessing.spawn, os, sys
import harness.sweep.orphaned_start
from harness.sweep import fork_server
assert "harness.sweep.orphaned_start" in fork_server.PRELOAD
read, write = os.pipe()
os.close(write)
try:
    multiprocessing.spawn._main(read, None)
except EOFError:
    sys.excepthook(*sys.exc_info())
try:
    raise EOFError("any other end of input")
except EOFError:
    sys.excepthook(*sys.exc_info())
"""


def test_a_worker_whose_sweep_died_as_it_handed_over_the_job_prints_no_traceback():
    ended = subprocess.run([sys.executable, "-c", ORPHANED_START], capture_output=True, text=True, timeout=120)
    assert ended.returncode == 0, ended.stderr
    assert ended.stderr.count("Traceback") == 1 and "any other end of input" in ended.stderr
    assert "Ran out of input" not in ended.stderr
