"""Where layoutbench keeps what it can recompute, and how an entry is written and read.

``$LAYOUTBENCH_CACHE_DIR``, else ``~/.cache/layoutbench``, holds one folder per kind (:data:`KINDS`).

A :class:`DiskCache` entry is written to a temporary file and renamed into place, so no
reader sees half an entry; a per-entry lock makes a second process that wants it wait for
the first rather than compute it again; each entry carries its length and a CRC-32 of its
content, so a truncated or damaged one is said on stderr and rebuilt, never read as a wrong
value (a CRC guards against accidents, not adversaries, and checks the hundreds of
megabytes a warm run reads about six times faster than SHA-256). A ``mapped`` kind's
entries (large arrays) are read through a private copy-on-write memory map, their body
64-byte aligned, so a loader makes tensors of it in place. A folder or an entry another
user could write is refused (:func:`layoutkit.files.cache_folder`): entries are unpickled,
so a planted one would run as whoever reads it. Reading an entry marks it used (its
modification time), so :func:`prune` can drop what no run has needed for a while (each
change of the lowering code leaves a new prefix of every model behind); adding one evicts
the least recently used where the entries hold more than the size limit, never one a
running process uses (:mod:`harness.cache_limit`).
"""

import contextlib
import mmap
import os
import shutil
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import Callable

from harness.cache_limit import evict, kind_files, mark_used
from layoutkit.files import cache_folder, cache_root, file_lock, refuse_if_others_can_write

FORMAT = b"layoutbench-cache-"  # then the format's number
MAGIC = FORMAT + b"2\n"
MAPPED_MAGIC = FORMAT + b"2-mapped\n"  # then the same, and zeros up to MAPPED_BODY_OFFSET
MAPPED_BODY_OFFSET = 64
KINDS = {
    "exports": "torch.export programs of the models",
    "prefixes": "ET-VK lowerings up to the layout pass, shared by every strategy",
    "etrecords": "edge programs before delegation as ETRecords, drawn by Model Explorer (layoutbench explore)",
    "records": "measurements by identity, reused by any run, asv process or commit",
    "lowering-memory": "peak memory of lowering each model (asv), by lowering identity",
    "npm": "the dashboard's scripts from the npm registry",
    "vgf-host": "Debian trixie's runtime for the Arm ML SDK tools and glslc",
    "runtime": "executor_runner: one put there by hand, and runtime build's, with their build directories",
    "asv-results": "the asv suites' results directories (programs and ETDumps beside their records)",
    "checked-tables": "the cost tables whose fitted model built in a process of its own, by digest",
    "warm": "the warm servers' logs (layoutbench serve), one per code and cache",
}
# The kinds made of DiskCache entries (the others hold tools, and are cleared whole).
ENTRY_KINDS = ("exports", "prefixes", "etrecords", "records", "lowering-memory")


class DiskCache:
    """Entries of one kind, by key (a file-name-safe digest); ``mapped``: see the module."""

    def __init__(self, kind: str, mapped: bool = False):
        self.kind, self.mapped = kind, mapped
        self.magic = MAPPED_MAGIC if mapped else MAGIC
        self.body_offset = MAPPED_BODY_OFFSET if mapped else len(MAGIC) + 12

    def _header(self, body) -> bytes:
        """The magic, the body's length (8 bytes) and CRC-32 (4), little-endian, and zeros to the body."""
        header = self.magic + len(body).to_bytes(8, "little") + zlib.crc32(body).to_bytes(4, "little")
        return header.ljust(self.body_offset, b"\0")

    @property
    def directory(self) -> Path:
        return cache_folder(self.kind)

    def path(self, key: str) -> Path:
        return self.directory / key

    def read(self, key: str) -> bytes | memoryview | None:
        """The entry's content (a view of its memory map where ``mapped``), or None when
        there is none or it is damaged (then removed)."""
        mark_used(self.kind, key)
        try:
            with self.path(key).open("rb") as entry:
                refuse_if_others_can_write(entry.name, os.fstat(entry.fileno()))
                header = entry.read(self.body_offset)
                if self.mapped and header.startswith(self.magic):
                    body = memoryview(mmap.mmap(entry.fileno(), 0, access=mmap.ACCESS_COPY))[self.body_offset:]
                else:
                    body = entry.read()  # no copy of a large body
                with contextlib.suppress(OSError):  # a cache shared read-only is still read
                    os.utime(entry.fileno())  # used now: see prune
        except FileNotFoundError:
            return None
        if header.startswith(FORMAT) and not header.startswith(self.magic):
            written_as = header.partition(b"\n")[0].decode(errors="replace")
            self.discard(key, f"of another format ({written_as}, not {self.magic.decode().strip()})")
            return None
        if header != self._header(body):
            self.discard(key, "truncated or damaged")
            return None
        return body

    def discard(self, key: str, why: str) -> None:
        print(f"layoutbench: cache entry {self.path(key)} is {why}; rebuilding it", file=sys.stderr)
        self.path(key).unlink(missing_ok=True)

    def write(self, key: str, body: bytes) -> None:
        """Write the entry atomically: a reader sees the old entry, none, or the whole new one;
        then evict what the cache holds beyond its limit."""
        mark_used(self.kind, key)
        handle, temporary = tempfile.mkstemp(dir=self.directory, prefix=f".{key}.", suffix=".tmp")
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(self._header(body))
                out.write(body)
                out.flush()
                os.fsync(out.fileno())
            os.replace(temporary, self.path(key))
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        evict(ENTRY_KINDS, self.body_offset + len(body))

    def lock(self, key: str):
        """Held while one process fills ``key``; others wait, then find the entry."""
        return file_lock(self.directory / f".{key}.lock")

    def get(self, key: str, load: Callable[[bytes], object]) -> tuple[object, bool]:
        """(the value stored under ``key``, True), or (None, False) where there is none or
        it does not load (then it is removed, to be rebuilt)."""
        body = self.read(key)
        if body is None:
            return None, False
        try:
            return load(body), True
        except Exception as error:  # an entry of an incompatible or broken writer
            self.discard(key, f"unreadable ({type(error).__name__}: {error})")
            return None, False

    def get_or_create(self, key: str, compute: Callable[[], object], dump: Callable[[object], bytes],
                      load: Callable[[bytes], object]) -> tuple[object, bool]:
        """(the value stored under ``key``, True), or ``compute()`` stored there and read back
        (so a value never depends on whether the cache was warm) and False; an entry that
        fails to load is rebuilt."""
        with self.lock(key):
            value, found = self.get(key, load)
            if found:
                return value, True
            body = dump(compute())
            self.write(key, body)
            if self.mapped:  # read back as a warm run reads it: from its map (unless removed meanwhile)
                body = self.read(key) or body
            return load(body), False


def usage() -> list[dict]:
    """Each kind of cache: its folder, entries and bytes."""
    rows = []
    for kind, what in KINDS.items():
        directory = cache_root() / kind
        files = [p for p in directory.rglob("*") if p.is_file() and not p.name.startswith(".")]
        rows.append({"kind": kind, "entries": len(files), "bytes": sum(p.stat().st_size for p in files),
                     "directory": str(directory), "holds": what})
    return rows


def clear(kinds: list[str]) -> None:
    for kind in kinds:
        shutil.rmtree(cache_root() / kind, ignore_errors=True)


def prune(kinds: list[str], unused_for_days: int) -> tuple[int, int]:
    """Remove the entries of ``kinds`` (of :data:`ENTRY_KINDS`) that no process has read or
    written for ``unused_for_days`` days, with the locks and a crashed writer's temporary
    files as old; returns (entries, bytes) removed. An entry removed while another process
    wants it is computed again there, as on a cold cache."""
    cutoff = time.time() - unused_for_days * 86400
    removed = removed_bytes = 0
    for kind in kinds:
        for entry, status in kind_files(kind, hidden=True):
            if status.st_mtime < cutoff:
                Path(entry.path).unlink(missing_ok=True)
                removed += not entry.name.startswith(".")
                removed_bytes += status.st_size
    return removed, removed_bytes
