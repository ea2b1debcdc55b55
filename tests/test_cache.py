"""The disk cache: atomic, safe under concurrent writers, damaged entries rebuilt with one
line; ``layoutbench cache``; and lowering prefixes that come back byte for byte."""

import dataclasses
import gc
import json
import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import strategies
from harness.cache import MAGIC, DiskCache
from harness.errors import UsageError
from harness.pipeline.model import pipeline
from harness.targets.vulkan.compile import serialization
from harness.targets.vulkan.compile.prefix import LOWERING_PREFIX, PREFIXES, prefix_key, vulkan_lowering
from harness.warm import client
from layoutkit.files import TRUST_SHARED_ENV

from .helpers import cache_worker
from .helpers.tables import TRANSITIONS_ONLY
from .conftest import QUICK_ZOO, SMALL_MODEL

LAYOUTBENCH = Path(sys.executable).parent / "layoutbench"


@pytest.fixture
def cache_dir(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("LAYOUTBENCH_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_two_processes_filling_one_entry_compute_it_once(cache_dir, tmp_path):
    log = tmp_path / "computed.log"
    context = multiprocessing.get_context("spawn")
    with context.Manager() as manager, context.Pool(2) as pool:
        barrier = manager.Barrier(2)
        values = pool.starmap(cache_worker.fill,
                              [(str(cache_dir), "entry", marker, str(log), barrier) for marker in ("a", "b")])
    assert values[0] == values[1] and len(values[0]) == 1_000_000
    assert len(log.read_text().split()) == 1, "the second process waits for the first and reads its entry"
    assert DiskCache("test").read("entry") == values[0]
    assert [p.name for p in (cache_dir / "test").iterdir() if p.suffix == ".tmp"] == []


def _flip_one_bit(entry: bytes) -> bytes:
    middle = len(entry) // 2
    return entry[:middle] + bytes([entry[middle] ^ 1]) + entry[middle + 1:]


@pytest.mark.parametrize("mapped", [False, True], ids=["read", "mapped"])
@pytest.mark.parametrize("damage, why", [
    (lambda entry: entry[:500], "truncated or damaged"),  # a writer killed mid-file (not ours: ours rename)
    (_flip_one_bit, "truncated or damaged"),
    (lambda entry: b"layoutbench-cache-1\n" + entry[len(MAGIC):], "of another format (layoutbench-cache-1, not "
     "{magic})"),
], ids=["truncated", "one-bit-flipped", "older-format"])
def test_a_damaged_entry_is_rebuilt_with_one_line(cache_dir, capsys, damage, why, mapped):
    cache = DiskCache("test", mapped=mapped)
    why = why.format(magic=cache.magic.decode().strip())
    cache.write("entry", b"x" * 1000)
    path = cache.path("entry")
    path.write_bytes(damage(path.read_bytes()))
    value, cached = cache.get_or_create("entry", lambda: b"rebuilt", lambda v: v, lambda b: b)
    assert (value, cached) == (b"rebuilt", False)
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"layoutbench: cache entry {path} is {why}; rebuilding it"]
    assert cache.read("entry") == b"rebuilt"


def test_tensors_come_back_as_views_of_the_mapped_entry(cache_dir):
    weight = torch.nn.Parameter(torch.arange(24, dtype=torch.float32).reshape(4, 6))
    shared = torch.arange(10, dtype=torch.int64)
    value = {"weight": weight, "columns": weight.data.t(), "slice": shared[3:7], "shared": shared,
             "half": torch.ones(3, 5, dtype=torch.bfloat16)[:, ::2], "flags": torch.tensor([True, False]),
             "empty": torch.empty(0, 3), "grad": torch.zeros(2, requires_grad=True),
             "int8": torch.full((7,), -3, dtype=torch.int8), "meta": torch.empty(2, 2, device="meta")}
    cache = DiskCache("test", mapped=True)
    loaded, cached = cache.get_or_create("entry", lambda: value, serialization.dumps, serialization.loads)
    assert cached is False  # read back from the map all the same
    for name, tensor in value.items():
        back = loaded[name]
        assert (type(back), back.dtype, back.shape, back.stride(), back.device, back.requires_grad) == \
            (type(tensor), tensor.dtype, tensor.shape, tensor.stride(), tensor.device, tensor.requires_grad), name
        if tensor.device.type == "cpu":
            assert torch.equal(back.detach(), tensor.detach()), name
    assert loaded["slice"].untyped_storage().data_ptr() == loaded["shared"].untyped_storage().data_ptr()
    assert loaded["columns"].untyped_storage().data_ptr() == loaded["weight"].untyped_storage().data_ptr()
    body = cache.read("entry")  # loaded again from a map of the entry: every tensor lies in it
    start = torch.frombuffer(body, dtype=torch.uint8).data_ptr()
    again = serialization.loads(body)
    for name in ("weight", "slice", "half", "int8"):
        assert start <= again[name].data_ptr() < start + len(body), name
        assert again[name].data_ptr() % serialization.BUFFER_ALIGNMENT == 0 or name == "slice", name
    kept = again["half"]
    del again, body
    gc.collect()
    assert torch.equal(kept, value["half"])  # the map lives as long as a tensor of it
    on_disk = cache.path("entry").read_bytes()
    loaded["shared"].fill_(7)  # a private map: the entry is as written
    assert cache.path("entry").read_bytes() == on_disk
    assert torch.equal(serialization.loads(bytes(serialization.dumps(value)))["shared"], shared)  # read-only: a copy


def test_an_entry_that_does_not_load_is_rebuilt(cache_dir, capsys):
    cache = DiskCache("test")
    cache.write("entry", b"not a pickle")

    def load(body):
        if body != b"good":
            raise ValueError("bad format")
        return body

    assert cache.get_or_create("entry", lambda: b"good", lambda v: v, load) == (b"good", False)
    assert "is unreadable (ValueError: bad format); rebuilding it" in capsys.readouterr().err


@pytest.mark.slow
def test_a_damaged_prefix_entry_is_rebuilt_and_measures_the_same(cache_dir, tmp_path):
    def run(out):
        result = subprocess.run([str(LAYOUTBENCH), "run", "--models", "synthetic_small", "--strategies",
                                 "bfs-downstream", "--out", str(out), "--format", "json", "--fresh"],
                                capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)[0], result.stderr

    first, _ = run(tmp_path / "a")
    [entry] = [p for p in (cache_dir / "prefixes").iterdir() if not p.name.startswith(".")]
    entry.write_bytes(entry.read_bytes()[: entry.stat().st_size // 2])
    second, err = run(tmp_path / "b")
    assert f"cache entry {entry} is truncated or damaged; rebuilding it" in err
    for metric in ("transitions", "transition_bytes", "delegate_memory_bytes", "pte_bytes"):
        assert second[metric] == first[metric]


def test_cache_command_shows_and_clears(cache_dir):
    DiskCache("records").write("r1", b"{}")
    shown = subprocess.run([str(LAYOUTBENCH), "cache", "--format", "json"], capture_output=True, text=True)
    listing = json.loads(shown.stdout)
    assert listing["root"] == str(cache_dir)
    records = next(k for k in listing["kinds"] if k["kind"] == "records")
    assert records["entries"] == 1 and records["bytes"] > 0
    cleared = subprocess.run([str(LAYOUTBENCH), "cache", "--clear", "records"], capture_output=True, text=True)
    assert cleared.returncode == 0 and "cleared records" in cleared.stderr
    assert not (cache_dir / "records").exists()
    bad = subprocess.run([str(LAYOUTBENCH), "cache", "--clear", "everything"], capture_output=True, text=True)
    assert bad.returncode == 2 and "unknown cache kind everything; known: exports" in bad.stderr


def test_entries_no_run_used_are_pruned_and_reading_keeps_an_entry(cache_dir):
    """`cache --clear --unused-for DAYS` removes what no run has read or written for that
    long (lowering-code changes leave a new prefix of every model behind); a read marks an
    entry used; the tools' folders are left alone."""
    prefixes, records = DiskCache("prefixes"), DiskCache("records")
    for cache, key in ((prefixes, "stale"), (prefixes, "read"), (prefixes, "new"), (records, "stale")):
        cache.write(key, b"x" * 100)
    tool = cache_dir / "vgf-host" / "libc.so"
    tool.parent.mkdir()
    tool.write_bytes(b"elf")
    long_ago = time.time() - 40 * 86400
    for path in (prefixes.path("stale"), prefixes.path("read"), records.path("stale"), tool):
        os.utime(path, (long_ago, long_ago))
    assert prefixes.read("read") == b"x" * 100
    pruned = subprocess.run([str(LAYOUTBENCH), "cache", "--clear", "--unused-for", "30"],
                            capture_output=True, text=True)
    assert pruned.returncode == 0, pruned.stderr
    assert "removed 2 entries (" in pruned.stderr, pruned.stderr
    assert "unused for 30 days from exports, prefixes, etrecords, records, lowering-memory" in pruned.stderr
    assert sorted(p.name for p in prefixes.directory.iterdir() if not p.name.startswith(".")) == ["new", "read"]
    assert not records.path("stale").exists() and tool.exists()
    for args, message in ((["--unused-for", "30"], "add --clear [KIND ...]"),
                          (["--clear", "npm", "--unused-for", "1"], "npm: tools, not entries; clear them whole")):
        bad = subprocess.run([str(LAYOUTBENCH), "cache", *args], capture_output=True, text=True)
        assert bad.returncode == 2 and message in bad.stderr, bad.stderr


def _another_users(path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("making a folder another user's takes root")
    os.chown(path, 65534, 65534, follow_symlinks=False)  # nobody's


def _open_to_all(path: Path) -> None:
    path.chmod(0o777)


def _linked_to_a_folder_open_to_all(kind: Path) -> None:
    elsewhere = kind.parent.parent / "shared-records"
    kind.rename(elsewhere)
    elsewhere.chmod(0o777)
    kind.symlink_to(elsewhere)


@pytest.mark.parametrize("where, make_unsafe, why", [
    ("root", _open_to_all, "can be written by other users (mode 777)"),
    ("kind", lambda kind: kind.chmod(0o770), "can be written by other users (mode 770)"),
    ("kind", _linked_to_a_folder_open_to_all, "can be written by other users (mode 777)"),
    ("kind", _another_users, "belongs to another user (uid 65534)"),
    ("entry", _open_to_all, "can be written by other users (mode 777)"),
    ("entry", _another_users, "belongs to another user (uid 65534)"),
], ids=["root-open-to-all", "kind-group-writable", "kind-a-link-to-a-folder-open-to-all", "kind-another-users",
        "entry-open-to-all", "entry-another-users"])
def test_a_cache_another_user_could_write_is_refused_unless_trusted(cache_dir, monkeypatch, where, make_unsafe, why):
    """Prefix entries are unpickled, the runtime is run: what another user could plant in the
    cache would run as this one."""
    records = DiskCache("records")
    records.write("entry", b"{}")
    unsafe = {"root": cache_dir, "kind": cache_dir / "records", "entry": records.path("entry")}[where]
    make_unsafe(unsafe)
    with pytest.raises(UsageError) as refused:
        records.read("entry")
    assert str(refused.value).startswith(f"{unsafe} {why}, who could plant in the cache what runs as you")
    assert f"or {TRUST_SHARED_ENV}=1 if all who can write it are trusted" in str(refused.value)
    monkeypatch.setenv(TRUST_SHARED_ENV, "1")
    assert records.read("entry") == b"{}"


def test_a_cache_of_links_to_folders_of_the_users_own_is_used(cache_dir, tmp_path):
    """As the suite's own cache is made (tests/conftest.py): kinds linked to the user's folders."""
    users = tmp_path / "users-records"
    users.mkdir(mode=0o755)
    cache_dir.mkdir(mode=0o700)
    (cache_dir / "records").symlink_to(users)
    DiskCache("records").write("entry", b"{}")
    assert DiskCache("records").read("entry") == b"{}" and (users / "entry").exists()
    DiskCache("exports").write("made", b"x")
    assert (cache_dir / "exports").stat().st_mode & 0o777 == 0o700  # made closed to others


@pytest.mark.slow
def test_a_command_on_a_cache_others_can_write_stops_with_one_line(cache_dir, tmp_path):
    cache_dir.mkdir()
    cache_dir.chmod(0o777)
    refused = subprocess.run([str(LAYOUTBENCH), "run", "--models", "synthetic_small", "--strategies",
                              "bfs-downstream", "--out", str(tmp_path / "out")], capture_output=True, text=True,
                             timeout=600)
    assert refused.returncode == 2
    assert refused.stderr.splitlines() == [
        f"layoutbench: error: {cache_dir} can be written by other users (mode 777), who could plant in the cache "
        "what runs as you: chmod go-w it if it is yours, another cache (LAYOUTBENCH_CACHE_DIR), or "
        f"{TRUST_SHARED_ENV}=1 if all who can write it are trusted"]
    assert not (tmp_path / "out").exists(), "a refused run makes nothing"


def test_serve_on_a_cache_of_another_users_is_one_line(cache_dir):
    cache_dir.mkdir()
    _another_users(cache_dir)
    refused = subprocess.run([str(LAYOUTBENCH), "serve"], capture_output=True, text=True, timeout=120,
                             env={k: v for k, v in os.environ.items() if k != TRUST_SHARED_ENV})
    assert refused.returncode == 2
    assert refused.stderr.splitlines() == [
        f"layoutbench: error: {cache_dir} belongs to another user (uid 65534), who could plant in the cache what "
        f"runs as you: chmod go-w it if it is yours, another cache (LAYOUTBENCH_CACHE_DIR), or {TRUST_SHARED_ENV}=1 "
        "if all who can write it are trusted"]


def test_the_warm_servers_log_is_never_opened_through_a_link(cache_dir, tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("another user's file\n")
    _, log = client.server_files()
    log.parent.mkdir(parents=True)
    log.symlink_to(victim)
    with pytest.raises(UsageError, match=f"the warm server's log {log} cannot be opened"):
        client.start(dict(os.environ), idle_minutes=0.05)
    assert victim.read_text() == "another user's file\n"


@pytest.mark.slow
@pytest.mark.parametrize("model", QUICK_ZOO)
def test_programs_from_a_cached_prefix_are_byte_identical_to_a_cold_lowering(model):
    """Every strategy's delegate payloads and whole .pte from the prefix read back from the
    cache equal those from a cold lowering. Where no test has lowered the model yet, the cold
    lowering is what fills the suite's cache, so the model is lowered once, not twice."""
    lowered_cold = []

    def lower_cold(made):
        lowered_cold.append(LOWERING_PREFIX.build(made))
        return lowered_cold[-1]

    # Always the prefix as read back from the cache, as vulkan_lowering() gives it.
    cached = pipeline(model).cached(dataclasses.replace(LOWERING_PREFIX, build=lower_cold))
    assert PREFIXES.read(prefix_key(model)) is not None
    cold = lowered_cold[0] if lowered_cold else lower_cold(pipeline(model))
    for name in strategies.list_strategies():
        cls = strategies.get_strategy(name)
        from_cache, from_cold = cached.lower(cls, TRANSITIONS_ONLY), cold.lower(cls, TRANSITIONS_ONLY)
        assert [p.result.processed_bytes for p in from_cache.partitions] == [
            p.result.processed_bytes for p in from_cold.partitions], name
        assert bytes(from_cache.to_pte()) == bytes(from_cold.to_pte()), name


@pytest.mark.slow
def test_cached_prefixes_load_in_a_new_process():
    """What a prefix refers to must exist in a process that never lowered anything (ExecuTorch
    defines some operators, EDGE_DO_NOT_DECOMP ones, only while lowering)."""
    for model in QUICK_ZOO:
        vulkan_lowering(pipeline(model))  # the entry exists
    script = ("import os, sys, models; from harness.targets.vulkan.compile.prefix import PREFIXES, prefix_key; "
              "from harness.targets.vulkan.compile import serialization; from layoutkit.files import CacheSettings, install; "
              "install(CacheSettings.from_environment(os.environ)); "
              "[serialization.loads(PREFIXES.read(prefix_key(name))) for name in models.list_models(zoo='quick')]; "
              "print('loaded')")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "loaded"


def test_a_prefix_is_kept_across_edits_to_the_cost_model_and_not_across_edits_to_the_lowering(monkeypatch):
    import costmodel.table
    from harness.targets.vulkan.compile import lowering
    from layoutkit import source_loader

    before = prefix_key(SMALL_MODEL)

    def edited(path):
        def source_bytes(file):
            return original(file) + (b"# edited" if Path(file) == Path(path.__file__) else b"")
        return source_bytes

    original = source_loader.source_bytes
    monkeypatch.setattr(source_loader, "source_bytes", edited(costmodel.table))
    assert prefix_key(SMALL_MODEL) == before
    monkeypatch.setattr(source_loader, "source_bytes", edited(lowering))
    assert prefix_key(SMALL_MODEL) != before
