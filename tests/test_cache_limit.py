"""The cache's size limit: the least recently used entries go first, never one a running
process uses; ``layoutbench cache`` lists every kind, the warm server's logs too, and says the limit."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.cache import DiskCache
from harness.cache_limit import IN_USE, MAX_SIZE_ENV
from harness.warm import client

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


def _kept(cache_dir: Path) -> list[str]:
    return sorted(f"{kind}/{p.name}" for kind in ("prefixes", "records") for p in (cache_dir / kind).iterdir()
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
    monkeypatch.setenv(MAX_SIZE_ENV, "0")  # no limit (read once per process and cache: this is a new cache)
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
    monkeypatch.setenv(MAX_SIZE_ENV, "lots")
    refused = cache()
    assert refused.returncode == 2
    assert refused.stderr.splitlines() == [f"layoutbench: error: {MAX_SIZE_ENV}=lots is not a size: set it to one "
                                           "such as 20G, 500M or 1T (GiB, MiB, TiB), or 0 for no limit"]
