"""The warm server: a command run through it is the command run without it (output, exit
code, records; an edited strategy measured afresh, a file saved twice within a second too;
the signals its caller ignores; its own random numbers), Ctrl-C and a killed client end the
command as they would, what would make it differ (interpreter flags among it) sends the
command past it, and a stopped server or a slow client holds no one."""

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import strategies
from harness.results.store import RecordStore
from harness.warm import client
from harness.warm.preload import OWN_PACKAGES, ImportedFiles
from layoutkit import files

from .helpers.caches import with_shared_entries
from .helpers.streams import lines_of, rest_of, wait_for_line

LAYOUTBENCH = Path(sys.executable).parent / "layoutbench"
PLUG = """from executorch.backends.vulkan._passes.tag_memory_meta_pass import TagMemoryMetaPass


class Plug(TagMemoryMetaPass):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.max_trace_search_depth = {depth}
"""


@contextlib.contextmanager
def _served_environment(cache: Path, **variables: str):
    """An environment of its own (cache included, so its server is the test's alone; the
    suite's exports and prefixes linked in) with a warm server, stopped afterwards (killed if
    a command it runs does not end). Bytecode is cached, as it is where no one says otherwise."""
    unset = ("LAYOUTBENCH_NO_SERVER", "PYTHONDONTWRITEBYTECODE")
    environment = {k: v for k, v in os.environ.items() if k not in unset}
    environment.update(LAYOUTBENCH_CACHE_DIR=str(cache), **variables)
    with_shared_entries(cache)
    started = _layoutbench(environment, "serve", "--idle-minutes", "10")
    assert started.returncode == 0, started.stderr
    assert "commands run through it" in started.stderr
    try:
        yield environment
    finally:
        pid = _status(environment, required=False)
        _layoutbench(environment, "serve", "--stop")
        deadline = time.monotonic() + 30
        while _status(environment, required=False) and time.monotonic() < deadline:
            time.sleep(0.2)
        if pid and _status(environment, required=False):
            os.kill(pid["pid"], signal.SIGKILL)  # its commands end with it


@pytest.fixture(scope="module")
def environment(tmp_path_factory):
    with _served_environment(tmp_path_factory.mktemp("cache")) as environment:
        yield environment


def _layoutbench(environment: dict, *args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([str(LAYOUTBENCH), *args], capture_output=True, text=True, timeout=600, env=environment,
                          cwd=cwd)


@contextlib.contextmanager
def _cache_of(environment: dict):
    """This process sees the test's cache, and so its server, while in the block."""
    saved = files.cache_settings()
    files.install(files.CacheSettings.from_environment(environment))
    try:
        yield
    finally:
        files.install(saved)


def _status(environment: dict, required: bool = True) -> dict | None:
    """What the test's server says of itself (None: none listens)."""
    with _cache_of(environment):
        status = client.status()
    assert status is not None or not required, "the test's warm server is not running"
    return status


def _deterministic(records: list[dict]) -> list[dict]:
    """Records without what differs between any two runs (timings, timestamps, memory peaks)."""
    varying = ("_seconds", "timestamp", "worker_peak_rss_bytes")
    return [{k: v for k, v in r.items() if not k.endswith(varying)} for r in records]


def _cold(environment: dict) -> dict:
    return {**environment, "LAYOUTBENCH_NO_SERVER": "1"}


@pytest.mark.slow
def test_a_command_through_the_server_is_the_command_without_it(environment, tmp_path):
    served = _status(environment)["served"]
    for args in (["list", "strategies"], ["list", "models", "--zoo", "quick"], ["run", "--zoo", "huge"], ["bogus"]):
        warm, cold = _layoutbench(environment, *args), _layoutbench(_cold(environment), *args)
        assert (warm.returncode, warm.stdout, warm.stderr) == (cold.returncode, cold.stdout, cold.stderr), args
    assert _status(environment)["served"] == served + 4  # each went through the server
    run = ["run", "--models", "synthetic_small", "--strategies", "dfs-upstream,bfs-downstream", "--format", "json"]
    warm = _layoutbench(environment, *run, "--out", str(tmp_path / "warm"))
    cold = _layoutbench(_cold(environment), *run, "--fresh", "--out", str(tmp_path / "cold"))
    assert warm.returncode == cold.returncode == 0, warm.stderr + cold.stderr
    assert _deterministic(json.loads(warm.stdout)) == _deterministic(json.loads(cold.stdout))
    assert _status(environment)["served"] == served + 5


@pytest.mark.slow
def test_an_edited_strategy_is_measured_afresh(environment, tmp_path):
    plug = tmp_path / "plug.py"
    run = ["run", "--models", "synthetic_small", "--strategies", "plug.py:Plug", "--format", "json"]
    transitions, served = {}, _status(environment)["served"]
    for depth in (64, 4, 64):
        plug.write_text(PLUG.format(depth=depth))
        warm = _layoutbench(environment, *run, "--out", str(tmp_path / f"warm{depth}"), cwd=tmp_path)
        assert warm.returncode == 0, warm.stderr
        [record] = json.loads(warm.stdout)
        transitions.setdefault(depth, set()).add(record["transitions"])
    assert _status(environment)["served"] == served + 3
    cold = _layoutbench(_cold(environment), *run, "--fresh", "--out", str(tmp_path / "cold"), cwd=tmp_path)
    [cold_record] = json.loads(cold.stdout)
    # The pinned pass's search depth (64) and a shallow one (4): 9 and 10 transitions on this model.
    assert transitions == {64: {9}, 4: {10}}
    assert cold_record["transitions"] == 9
    assert {k: v for k, v in record.items() if k in ("transition_bytes", "pte_bytes", "delegate_memory_bytes")} == \
        {k: v for k, v in cold_record.items() if k in ("transition_bytes", "pte_bytes", "delegate_memory_bytes")}


PLUG_OF_A_HELPER = """from executorch.backends.vulkan._passes.tag_memory_meta_pass import TagMemoryMetaPass

from plugins import depth


class Plug(TagMemoryMetaPass):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.max_trace_search_depth = depth.DEPTH
"""
# What each case writes (the edited file, with the search depth in it, first) and the strategy it names.
EDITS = {
    "plug-in-file": ({"plug.py": PLUG}, "plug.py:Plug"),
    "plug-in-module": ({"plugins/plug.py": PLUG, "plugins/__init__.py": ""}, "plugins.plug:Plug"),
    "helper-of-a-plug-in": ({"plugins/depth.py": "DEPTH = {depth}\n", "plugins/plug.py": PLUG_OF_A_HELPER,
                             "plugins/__init__.py": ""}, "plugins.plug:Plug"),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", EDITS)
def test_a_file_saved_twice_within_a_second_is_measured_as_saved_warm_and_cold(environment, tmp_path, case):
    """Python validates cached bytecode by the source's mtime in whole seconds and its size: two
    saves of one size within a second (a search depth of 64, then of 4) must not leave the
    first save's code running under the second's identity, through the server or without it."""
    files, strategy = EDITS[case]
    edited = tmp_path / next(iter(files))
    saved_at = int(time.time()) - 60
    run = ["run", "--models", "synthetic_small", "--strategies", strategy, "--format", "json"]
    records = {}
    for depth, second, how in ((64, 0.25, "warm"), (4, 0.75, "warm"), (4, 0.75, "cold")):
        for name, text in files.items():
            (tmp_path / name).parent.mkdir(exist_ok=True)
            (tmp_path / name).write_text(text.format(depth=f"{depth:>2}"))  # the same size
        os.utime(edited, (saved_at + second, saved_at + second))
        done = _layoutbench(environment if how == "warm" else _cold(environment), *run,
                            *(["--fresh"] if how == "cold" else []), "--out", str(tmp_path / f"{how}{depth}"),
                            cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        [records[depth, how]] = json.loads(done.stdout)
    # The pinned pass's search depth (64) and a shallow one (4): 9 and 10 transitions on this model.
    assert [records[key]["transitions"] for key in ((64, "warm"), (4, "warm"), (4, "cold"))] == [9, 10, 10]
    assert _deterministic([records[4, "warm"]]) == _deterministic([records[4, "cold"]])


STUCK = """import os
import time
from pathlib import Path

from executorch.backends.vulkan._passes.tag_memory_meta_pass import TagMemoryMetaPass


class Stuck(TagMemoryMetaPass):
    def call(self, graph_module):
        Path({marker!r}).write_text(str(os.getpid()))
        while True:
            time.sleep(1)
"""


def _caller_s_signals(ignore: tuple = ()):
    """What a caller's process starts its command with: the signals ``ignore`` ignored, and no
    other of SIGHUP and SIGINT, whatever the test runner itself ignores (a background job of a
    script ignores SIGINT)."""

    def set_dispositions():
        for number in (signal.SIGHUP, signal.SIGINT):
            signal.signal(number, signal.SIG_IGN if number in ignore else signal.SIG_DFL)

    return set_dispositions


def _stuck_run(environment: dict, tmp_path: Path, name: str) -> tuple[subprocess.Popen, int]:
    """A sweep through the server, once its strategy's pass is stuck; and the stuck worker's pid."""
    marker = tmp_path / f"{name}.in-pass"
    (tmp_path / f"{name}.py").write_text(STUCK.format(marker=str(marker)))
    process = subprocess.Popen(
        [str(LAYOUTBENCH), "run", "--models", "synthetic_small", "--strategies", f"{name}.py:Stuck",
         "--out", str(tmp_path / name)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=environment, cwd=tmp_path, preexec_fn=_caller_s_signals())
    deadline = time.monotonic() + 300
    while not marker.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert marker.exists(), process.communicate()
    while not marker.read_text():
        time.sleep(0.05)
    return process, int(marker.read_text())


def _ends(pid: int, seconds: float = 60) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.2)
    return False


def test_ctrl_c_and_a_killed_client_end_the_command(environment, tmp_path):
    interrupted, worker = _stuck_run(environment, tmp_path, "interrupted")
    assert _status(environment)["running"] == 1
    interrupted.send_signal(signal.SIGINT)
    _, stderr = interrupted.communicate(timeout=60)
    assert interrupted.returncode == 130
    assert "interrupted; finished records are kept" in stderr
    assert _ends(worker), "the interrupted command's worker kept running"

    killed, worker = _stuck_run(environment, tmp_path, "killed")
    killed.kill()
    killed.wait()
    assert _ends(worker), "the worker of a killed client's command kept running"
    deadline = time.monotonic() + 60
    while _status(environment)["running"] and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _status(environment)["running"] == 0, "the command of a killed client kept running"


PROBE = """import json
import os
import signal
import time
from pathlib import Path

import torch
from executorch.backends.vulkan._passes.tag_memory_meta_pass import TagMemoryMetaPass

Path({marker!r} + ".tmp").write_text(json.dumps({{
    "ignored": [name for name in ("SIGHUP", "SIGINT") if signal.getsignal(getattr(signal, name)) == signal.SIG_IGN],
    "random": torch.rand(4).tolist()}}))
os.replace({marker!r} + ".tmp", {marker!r})
while not Path({go!r}).exists():
    time.sleep(0.05)


class Probe(TagMemoryMetaPass):
    pass
"""


def _probe(environment: dict, tmp_path: Path, name: str, ignore: tuple = ()) -> tuple[subprocess.Popen, dict]:
    """A sweep through the server (its caller ignoring the signals ``ignore``, as in ``nohup
    layoutbench ... &`` from a script), once its strategy's module is imported and waits for
    ``go``; and what that module saw: the signals ignored, torch's first numbers."""
    marker = tmp_path / f"{name}.json"
    (tmp_path / f"{name}.py").write_text(PROBE.format(marker=str(marker), go=str(tmp_path / "go")))
    command = [str(LAYOUTBENCH), "run", "--models", "synthetic_small", "--strategies", f"{name}.py:Probe",
               "--out", str(tmp_path / name)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment,
                               cwd=tmp_path, preexec_fn=_caller_s_signals(ignore))
    deadline = time.monotonic() + 300
    while not marker.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert marker.exists(), process.communicate()
    return process, json.loads(marker.read_text())


def test_a_command_ignores_what_its_caller_ignores_and_draws_its_own_random_numbers(environment, tmp_path):
    served = _status(environment)["served"]
    nohup, seen = _probe(environment, tmp_path, "nohup", ignore=(signal.SIGHUP, signal.SIGINT))
    assert seen["ignored"] == ["SIGHUP", "SIGINT"]  # as a new process started by the caller would
    nohup.send_signal(signal.SIGHUP)  # a closed terminal, and a Ctrl-C, that the command survives
    nohup.send_signal(signal.SIGINT)
    (tmp_path / "go").touch()
    _, stderr = nohup.communicate(timeout=600)
    assert nohup.returncode == 0, stderr
    plain, plain_seen = _probe(environment, tmp_path, "plain")
    _, stderr = plain.communicate(timeout=600)
    assert plain.returncode == 0, stderr
    assert plain_seen["ignored"] == []
    assert plain_seen["random"] != seen["random"]  # torch seeded anew in each command, as in a new process
    assert _status(environment)["served"] == served + 2


def test_python_m_runs_through_the_server_and_other_interpreter_flags_without_it(environment):
    served = _status(environment)["served"]
    python_m = subprocess.run([sys.executable, "-m", "harness.cli", "list", "zoos"], capture_output=True, text=True,
                              env=environment, timeout=600)
    assert (python_m.returncode, python_m.stderr) == (0, "")
    assert "quick" in python_m.stdout.split()
    assert _status(environment)["served"] == served + 1
    optimized = subprocess.run([sys.executable, "-O", "-m", "harness.cli", "list", "zoos"], capture_output=True,
                               text=True, env=environment, timeout=600)
    assert (optimized.returncode, optimized.stdout) == (0, python_m.stdout)
    assert optimized.stderr.startswith("layoutbench: running without the warm server: the process context differs "
                                       "from the server's (interpreter flags)")
    assert _status(environment)["served"] == served + 1


@pytest.mark.slow
def test_a_stopped_server_holds_no_client_and_runs_no_command_given_up_on(environment):
    status = _status(environment)
    os.kill(status["pid"], signal.SIGSTOP)
    try:  # (bounded here, so that a client that waits for ever fails the test)
        listed = subprocess.run([str(LAYOUTBENCH), "list", "zoos"], capture_output=True, text=True, env=environment,
                                timeout=120)
        asked = subprocess.run([str(LAYOUTBENCH), "serve", "--status"], capture_output=True, text=True,
                               env=environment, timeout=120)
    finally:
        os.kill(status["pid"], signal.SIGCONT)
    assert listed.returncode == 0 and "quick" in listed.stdout.split()
    assert listed.stderr == f"layoutbench: running without the warm server: {client.NO_ANSWER}\n"
    assert (asked.returncode, asked.stderr) == (2, f"layoutbench: error: {client.NO_ANSWER}\n")
    assert _status(environment)["served"] == status["served"]  # the command its client gave up on never ran


@pytest.mark.slow
def test_a_server_stopped_after_it_took_the_command_holds_its_client_for_a_bounded_time(environment, tmp_path):
    run = subprocess.Popen([str(LAYOUTBENCH), "run", "--models", "synthetic_small", "--strategies", "all",
                            "--workers", "1", "--out", str(tmp_path), "--fresh"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=environment)
    stderr = lines_of(run.stderr)
    server = _status(environment)["pid"]
    try:
        assert wait_for_line(stderr, "synthetic_small / bfs-downstream: ok", timeout=300)
        os.kill(server, signal.SIGSTOP)  # the command goes on to its end, which the server cannot report
        run.wait(timeout=120)
        rest = rest_of(stderr, timeout=30)
    finally:
        os.kill(server, signal.SIGCONT)
        if run.poll() is None:  # a client that waits for ever fails the test, and is ended
            run.kill()
    assert run.returncode == 1
    assert rest[-1] == (f"layoutbench: failed: the warm server did not report the command's end within "
                        f"{client.REPORT_TIMEOUT} s (stopped, or stuck): what it finished is kept, its exit status "
                        "is unknown\n")
    assert len(RecordStore(tmp_path).read()) == len(strategies.list_strategies())
    assert _layoutbench(environment, "list", "zoos").stderr == ""  # the server, continued, serves on


def test_a_slow_client_holds_no_other(environment):
    served = _status(environment)["served"]
    with _cache_of(environment):
        path, _ = client.server_files()
    slow = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    slow.connect(str(path))
    slow.sendall(b'{"status"')
    done = threading.Event()

    def drip():  # a byte a second, never the end of the request
        with contextlib.suppress(OSError):
            while not done.wait(1):
                slow.send(b" ")

    dripping = threading.Thread(target=drip)
    dripping.start()
    try:
        listed = _layoutbench(environment, "list", "zoos")
    finally:
        done.set()
        dripping.join()
        slow.close()
    assert (listed.returncode, listed.stderr) == (0, "")
    assert _status(environment)["served"] == served + 1


@pytest.mark.slow
def test_what_would_differ_runs_without_the_server(environment):
    served = _status(environment)["served"]
    other = _layoutbench({**environment, "OMP_NUM_THREADS": "1"}, "list", "targets")
    assert other.returncode == 0 and "vulkan" in other.stdout.split()
    assert other.stderr.startswith("layoutbench: running without the warm server: the environment differs "
                                   "from the server's (OMP_NUM_THREADS)")
    niced = subprocess.run(["nice", "-n", "5", str(LAYOUTBENCH), "list", "targets"], capture_output=True, text=True,
                           env=environment, timeout=600)
    assert niced.returncode == 0 and niced.stdout == other.stdout
    assert "the process context differs from the server's (niceness)" in niced.stderr
    for flag in ("--verbose", "--verb"):
        verbose = _layoutbench(environment, flag, "list", "targets")
        assert verbose.returncode == 0 and verbose.stdout == other.stdout
    assert _status(environment)["served"] == served


@pytest.mark.slow
def test_a_changed_import_sends_a_command_past_the_server_which_starts_again(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("# imported by every process here, the server's too\n")
    with _served_environment(tmp_path / "cache", PYTHONPATH=str(site)) as environment:
        first = _layoutbench(environment, "list", "zoos")
        assert first.returncode == 0 and first.stderr == "" and _status(environment)["served"] == 1
        (site / "sitecustomize.py").write_text("# changed: an upgrade\n")
        declined = _layoutbench(environment, "list", "zoos")
        assert declined.returncode == 0 and declined.stdout == first.stdout
        assert declined.stderr.startswith(f"layoutbench: running without the warm server: {site / 'sitecustomize.py'} "
                                          "changed since the server imported it; it starts again")
        deadline = time.monotonic() + 300
        while _status(environment, required=False) is None and time.monotonic() < deadline:
            time.sleep(0.2)
        again = _layoutbench(environment, "list", "zoos")
        assert (again.returncode, again.stdout, again.stderr) == (0, first.stdout, "")
        assert _status(environment)["served"] == 1  # the server started again, and served it


def test_the_server_holds_no_code_of_ours_but_its_own(environment):
    status = _status(environment)
    assert status["modules"] > 1000  # torch, ExecuTorch and the rest, imported once
    # Its own package, and the loader that makes each command import the rest from its source as it is now.
    assert set(status["own_modules"]) <= {"harness", "harness.warm", "harness.warm.command_process",
                                          "harness.warm.preload", "layoutkit", "layoutkit.source_loader"}
    again = _layoutbench(environment, "serve")
    assert again.returncode == 0 and f"warm server {status['pid']}:" in again.stderr  # the same one


def test_imported_files_notice_a_change(tmp_path, monkeypatch):
    module = tmp_path / "warm_probe_module.py"
    module.write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import warm_probe_module  # noqa: F401

    try:
        files = ImportedFiles()
        files.note()
        assert files.changed() is None
        module.write_text("VALUE = 22\n")
        assert files.changed() == str(module)
        assert "warm_probe_module" not in OWN_PACKAGES
    finally:
        del sys.modules["warm_probe_module"]
