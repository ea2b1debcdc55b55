"""The cache's size limit: the least recently used entries go first, never one a running
process uses; ``layoutbench cache`` lists every kind, the warm server's logs too, and says the limit."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness import cli
from harness.cache import DiskCache
from harness.cache_limit import IN_USE
from harness.warm import client
from layoutkit.files import DEFAULT_MAX_SIZE, MAX_SIZE_ENV, CacheSettings

LAYOUTBENCH = Path(sys.executable).parent / "layoutbench"
BODY = b"x" * 3000  # an entry of 3,020 bytes with its header: three fit in 10K, four do not


@pytest.fixture
def cache_dir(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("LAYOUTBENCH_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _in_another_process(script: str) -> subprocess.Popen:
    """``script`` run by a new Python with ``DiskCache`` imported and the cache of its
    environment installed, as a command's, once it has printed a line."""
    start = ("import os\nfrom harness.cache import DiskCache\nfrom layoutkit.files import CacheSettings, install\n"
             "install(CacheSettings.from_environment(os.environ))\n")
    process = subprocess.Popen([sys.executable, "-c", f"{start}{script}"],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert process.stdout.readline() == "ready\n"
    return process


def _kept(cache_dir: Path, *kinds: str) -> list[str]:
    return sorted(f"{kind}/{p.name}" for kind in kinds or ("prefixes", "records") for p in (cache_dir / kind).iterdir()
                  if not p.name.startswith("."))


def test_a_cache_over_its_limit_evicts_the_least_recently_used_entries_never_one_in_use(cache_dir, monkeypatch):
    monkeypatch.setenv(MAX_SIZE_ENV, "10K")
    written = _in_another_process(  # a command that ended: what it used is no longer in use
        "for kind, key in (('prefixes', 'p0'), ('prefixes', 'p1'), ('records', 'r2'), ('prefixes', 'p3')):\n"
        f"    DiskCache(kind).write(key, {BODY!r})\n"
        "print('ready', flush=True)")
    written.communicate()
    reading = _in_another_process(  # a command that read p0 long ago and runs on
        "DiskCache('prefixes').read('p0')\nprint('ready', flush=True)\nimport sys; sys.stdin.read()")
    long_ago = time.time() - 86400
    for age, name in enumerate(("prefixes/p0", "prefixes/p1", "records/r2", "prefixes/p3")):
        os.utime(cache_dir / name, (long_ago + age, long_ago + age))
    try:
        DiskCache("records").write("new", BODY)  # five entries: the two least recently used not in use go
        assert _kept(cache_dir) == ["prefixes/p0", "prefixes/p3", "records/new"]
    finally:
        reading.communicate()  # that command ends
    DiskCache("records").write("newer", BODY)  # p0 is no longer in use: the least recently used goes
    assert _kept(cache_dir) == ["prefixes/p3", "records/new", "records/newer"]
    assert len(list((cache_dir / IN_USE).glob("*.list"))) == 1, "the ended processes' lists are removed"
    monkeypatch.setenv(MAX_SIZE_ENV, "0")  # no limit
    monkeypatch.setenv("LAYOUTBENCH_CACHE_DIR", str(cache_dir.with_name("unlimited")))
    for key in ("a", "b", "c", "d"):
        DiskCache("records").write(key, BODY)
    assert len(list((cache_dir.with_name("unlimited") / "records").glob("[a-d]"))) == 4


def test_the_cache_listing_shows_the_warm_servers_logs_and_the_limit_and_clears_the_logs(cache_dir, monkeypatch):
    _, log = client.server_files()
    log.parent.mkdir(parents=True)
    log.write_text("a warm server's log\n")

    def cache(*args):
        return subprocess.run([str(LAYOUTBENCH), "cache", *args], capture_output=True, text=True, timeout=120)

    monkeypatch.setenv(MAX_SIZE_ENV, "2G")
    listing = json.loads(cache("--format", "json").stdout)
    assert listing["max_size"] == 2 << 30
    assert next(k for k in listing["kinds"] if k["kind"] == "warm") == {
        "kind": "warm", "entries": 1, "bytes": log.stat().st_size, "directory": str(log.parent),
        "holds": "the warm servers' logs (layoutbench serve), one per code and cache"}
    table = cache()
    assert table.stdout.splitlines()[0] == f"{cache_dir} (20 B; entries 0 B of at most 2 GiB, {MAX_SIZE_ENV})"
    assert "the warm servers' logs" in table.stdout
    cleared = cache("--clear", "warm")
    assert cleared.returncode == 0 and "cleared warm" in cleared.stderr and not log.exists()


SIZES = "set it to one such as 20G, 500M or 1T (GiB, MiB, TiB), or 0 for no limit"


@pytest.mark.parametrize("size, problem", [
    ("lots", "=lots is not a size"),
    ("-5", "=-5 is not a size"),
    ("", " is set but empty"),
    ("99999999999999999999T", "=99999999999999999999T is more than a PiB, beyond any disk"),
    ("0.5", "=0.5 is less than a byte"),
])
def test_a_size_limit_that_is_no_size_stops_any_command_before_it_starts(cache_dir, monkeypatch, capsys, size, problem):
    """Even one that uses no cache (list zoos), or would reuse everything."""
    monkeypatch.setitem(os.environ, MAX_SIZE_ENV, size)  # not setenv, which installs the settings it names
    assert cli.main(["list", "zoos"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [f"layoutbench: error: {MAX_SIZE_ENV}{problem}: " + (
        f"{SIZES}; or unset it for the default, 20G" if not size else SIZES)]


def test_a_size_limit_that_is_no_size_is_one_line_from_the_console_script_too(cache_dir):
    """Where a warm server could run the command: the setting is said before one is looked for."""
    environment = {**os.environ, MAX_SIZE_ENV: "-5"}
    del environment["LAYOUTBENCH_NO_SERVER"]
    listed = subprocess.run([str(LAYOUTBENCH), "list", "zoos"], capture_output=True, text=True, timeout=300,
                            env=environment)
    assert (listed.returncode, listed.stdout) == (2, "")
    assert listed.stderr.splitlines() == [f"layoutbench: error: {MAX_SIZE_ENV}=-5 is not a size: {SIZES}"]


def test_a_size_limit_is_read_in_bytes_where_the_process_starts():
    def limit(size):
        return CacheSettings.from_environment({MAX_SIZE_ENV: size}).max_size

    assert (limit("10K"), limit("1.5GiB"), limit("2t"), limit("300"), limit("0")) == (
        10 << 10, 3 << 29, 2 << 40, 300, None)
    assert CacheSettings.from_environment({}).max_size == DEFAULT_MAX_SIZE == 20 << 30


def test_a_listing_over_a_lowered_limit_says_when_the_cache_shrinks(cache_dir, monkeypatch, capsys):
    monkeypatch.setenv(MAX_SIZE_ENV, "0")
    _in_another_process(f"for key in 'abcd':\n    DiskCache('records').write(key, {BODY!r})\n"
                        "print('ready', flush=True)").communicate()
    monkeypatch.setenv(MAX_SIZE_ENV, "10K")
    assert cli.main(["cache"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == (
        f"{cache_dir} (11.8 KiB; entries 11.8 KiB, over their limit of 10 KiB ({MAX_SIZE_ENV}): the least recently "
        "used that no running command uses go as soon as a command adds an entry)")
    DiskCache("records").write("e", BODY)  # a command adds one
    assert _kept(cache_dir, "records") == ["records/c", "records/d", "records/e"]


def test_an_ended_process_leaves_no_list_of_what_it_used(cache_dir, monkeypatch):
    writing = _in_another_process("DiskCache('records').write('r', b'entry')\nprint('ready', flush=True)\n"
                                  "import sys; sys.stdin.read()")
    assert len(list((cache_dir / IN_USE).glob("*.list"))) == 1  # while it lives
    writing.communicate()  # it ends
    assert list((cache_dir / IN_USE).glob("*")) == []


def test_a_sweeps_worker_leaves_no_list_of_what_it_used(tmp_path, monkeypatch):
    from harness.results.store import RecordStore
    from harness.sweep.execution import Execution
    from harness.sweep.planning import run_sweep

    from .helpers.caches import with_shared_entries

    cache = with_shared_entries(tmp_path / "cache")
    monkeypatch.setenv("LAYOUTBENCH_CACHE_DIR", str(cache))
    sweep = run_sweep(["synthetic_small"], ["bfs-downstream"], "vulkan", RecordStore(tmp_path / "results"),
                      fresh=True, execution=Execution(workers=1))
    assert [r["status"] for r in sweep.records] == ["ok"]
    assert [p.name for p in (cache / IN_USE).glob("*.list") if not p.name.startswith(f"{os.getpid()}-")] == []


def test_a_cache_whose_in_use_folder_cannot_be_written_still_takes_entries_and_evicts(cache_dir, monkeypatch):
    monkeypatch.setenv(MAX_SIZE_ENV, "10K")
    cache_dir.mkdir()
    (cache_dir / IN_USE).write_text("")  # a file, not a folder: no process can list what it uses there
    for key in ("a", "b", "c", "d"):
        DiskCache("records").write(key, BODY)
    assert _kept(cache_dir, "records") == ["records/b", "records/c", "records/d"]
