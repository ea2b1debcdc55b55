"""Where layoutbench keeps what it can recompute (:func:`cache_root`, :func:`cache_folder`), and the
lock through which processes take turns at a cache entry or a results directory (:func:`file_lock`).

What the cache holds is run (prefixes are unpickled, the fetched runtime and tools executed), so a
folder of it that another user could write would let that user plant what runs as this one:
:func:`cache_folder` refuses one unless the cache is shared on purpose (``LAYOUTBENCH_TRUST_SHARED_CACHE=1``).
Checking who can write is a few ``lstat`` calls per access; authenticating each entry with a key of the
user's would cost a keyed digest of every entry read (hundreds of megabytes in a warm run) and would
still leave the tools' folders, which hold programs, not entries, unguarded.

Which cache, how far it is trusted and how large it may grow is the user's choice, made in the
environment (:class:`CacheSettings`), read and checked where a process starts (the command line, the
asv suites, a worker, which gets its sweep's) and handed to :func:`install`: one setting for the whole
process, not a parameter, because every layer opens the cache through module-level objects (the export
and prefix caches, the record cache, the runtime's folder). Where none was installed, each setting is
what an environment without it means.
"""

import contextlib
import fcntl
import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from layoutkit.errors import UsageError

ROOT_ENV = "LAYOUTBENCH_CACHE_DIR"
TRUST_SHARED_ENV = "LAYOUTBENCH_TRUST_SHARED_CACHE"
MAX_SIZE_ENV = "LAYOUTBENCH_CACHE_MAX_SIZE"
# Room for the full zoo's exports and prefixes under several versions of the lowering code
# (each version keys new ones: 3.6 GB for 160 exports and 180 prefixes on a machine that
# measured for a day), while a sweep of the timm catalog, whose prefixes alone take 40 GB,
# keeps its most recently used half; a tenth of the 250 GB disks the uncapped cache filled.
DEFAULT_MAX_SIZE = 20 << 30
LARGEST_MAX_SIZE = 1 << 50  # a PiB: beyond any disk a cache is on (0 says "no limit")
SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
SIZES = "one such as 20G, 500M or 1T (GiB, MiB, TiB), or 0 for no limit"


def parse_max_size(text: str | None) -> int | None:
    """The cache's size limit in bytes that ``$LAYOUTBENCH_CACHE_MAX_SIZE`` states (``20G``,
    ``500M``, ``2T``, a number of bytes; ``0``: None, no limit; unset: :data:`DEFAULT_MAX_SIZE`);
    a :class:`UsageError` for an empty value, one that is no size, or one beyond any disk."""
    if text is None:
        return DEFAULT_MAX_SIZE
    if not text.strip():
        raise UsageError(f"{MAX_SIZE_ENV} is set but empty: set it to {SIZES}; or unset it for the default, 20G")
    size = re.fullmatch(r"(\d+(?:\.\d*)?)([KMGT]?)(?:i?B)?", text.strip(), re.IGNORECASE)
    if size is None:
        raise UsageError(f"{MAX_SIZE_ENV}={text} is not a size: set it to {SIZES}")
    limit = float(size[1]) * SIZE_UNITS[size[2].upper()]
    if limit > LARGEST_MAX_SIZE:
        raise UsageError(f"{MAX_SIZE_ENV}={text} is more than a PiB, beyond any disk: set it to {SIZES}")
    if 0 < limit < 1:  # which would be 0 bytes, no limit
        raise UsageError(f"{MAX_SIZE_ENV}={text} is less than a byte: set it to {SIZES}")
    return int(limit) or None


@dataclass(frozen=True)
class CacheSettings:
    """The cache a process uses: its folder (None: ``~/.cache/layoutbench`` of whoever runs
    it, so a worker on another machine uses its own), whether a cache other users can write
    is trusted, and the size its entries may take, in bytes (None: any; see
    :mod:`harness.cache_limit`)."""

    root: Path | None = None
    trust_shared: bool = False
    max_size: int | None = DEFAULT_MAX_SIZE

    @classmethod
    def from_environment(cls, environment: Mapping[str, str]) -> "CacheSettings":
        """The settings ``environment`` (a process's, handed in where it starts) names: ``$LAYOUTBENCH_CACHE_DIR``,
        ``$LAYOUTBENCH_TRUST_SHARED_CACHE=1``, ``$LAYOUTBENCH_CACHE_MAX_SIZE`` (:func:`parse_max_size`: a
        :class:`UsageError` where it is no size, so a command stops before it does anything)."""
        root = environment.get(ROOT_ENV)
        return cls(Path(root) if root else None, environment.get(TRUST_SHARED_ENV) == "1",
                   parse_max_size(environment.get(MAX_SIZE_ENV)))


_installed = CacheSettings()


def install(settings: CacheSettings) -> None:
    """Make ``settings`` this process's cache (see the module)."""
    global _installed
    _installed = settings


def cache_settings() -> CacheSettings:
    """The settings installed in this process (the default where none was)."""
    return _installed


def cache_root() -> Path:
    """The installed cache's folder: ``$LAYOUTBENCH_CACHE_DIR``, else ``~/.cache/layoutbench``."""
    return _installed.root or Path.home() / ".cache" / "layoutbench"


def others_can_write(path: Path, status: os.stat_result | None = None) -> str | None:
    """Why a user other than this one could change what ``path`` holds, or None: it (or the
    folder a link of this user's points to) must be this user's and closed to writes by its
    group and others. ``status``: the path's ``lstat`` (or an open file's ``fstat``) if known."""
    status = status or os.lstat(path)
    if stat.S_ISLNK(status.st_mode):
        if status.st_uid != os.getuid():
            return f"{path} is a link of another user's"
        status = os.stat(path)
    if status.st_uid != os.getuid():
        return f"{path} belongs to another user (uid {status.st_uid})"
    if status.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"{path} can be written by other users (mode {stat.S_IMODE(status.st_mode):o})"
    return None


def refuse_if_others_can_write(path: Path, status: os.stat_result | None = None) -> None:
    """Raise a :class:`UsageError` where :func:`others_can_write` finds a reason, unless the
    user trusts a shared cache (``LAYOUTBENCH_TRUST_SHARED_CACHE=1``)."""
    problem = None if _installed.trust_shared else others_can_write(path, status)
    if problem:
        raise UsageError(f"{problem}, who could plant in the cache what runs as you: chmod go-w it if it is "
                         f"yours, another cache ({ROOT_ENV}), or {TRUST_SHARED_ENV}=1 if all who can "
                         "write it are trusted")


def cache_folder(*parts: str) -> Path:
    """``cache_root()/parts`` (a kind's folder, or one inside it), each folder from the root
    down made where missing (closed to other users) and refused where another user could
    write it (see the module)."""
    folder = cache_root()
    for part in ("", *parts):
        folder = folder / part
        try:
            status = os.lstat(folder)
        except FileNotFoundError:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            status = os.lstat(folder)
        refuse_if_others_can_write(folder, status)
    return folder


def write_whole(path: Path, content: bytes) -> None:
    """``content`` into ``path`` whole or not at all: a reader meanwhile, or a write that fails
    (a full disk), finds the old file or the new, never one cut short."""
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        partial.write_bytes(content)
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)


@contextlib.contextmanager
def file_lock(path: Path, wait: bool = True):
    """An exclusive lock on ``path`` (created, with its folder, where missing) while in the block,
    which gets the lock file open for reading and writing. Held by another process: wait for it, or
    with ``wait=False`` raise :class:`BlockingIOError`. The kernel lets go of it when its process
    ends, however it ends, so a killed holder blocks no one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        try:
            yield handle
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
