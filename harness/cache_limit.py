"""The cache's size limit, and the entries running processes use, which it never evicts.

The entries of :data:`harness.cache.ENTRY_KINDS` hold together at most
``$LAYOUTBENCH_CACHE_MAX_SIZE`` (``20G``, ``500M``, ``2T``: GiB, MiB, TiB; a number of
bytes; ``0``: no limit), else :data:`layoutkit.files.DEFAULT_MAX_SIZE`: the installed
:class:`layoutkit.files.CacheSettings`' ``max_size``. Adding an entry past it evicts the
least recently used (modification time, which a read renews: see
:class:`harness.cache.DiskCache`) until they fit, never one a running process has read or
written: each process that uses the cache lists its entries in a file of ``.in-use/``
there, held locked while it lives and removed as it ends (:func:`release`). The kernel lets
go of that lock however the process ends, so a killed one holds nothing back, and the next
process to use the cache removes its list. So a command that needs more than the limit at
once holds the cache over it until its processes end (a sweep's worker ends with its model,
letting go of its prefix). An entry evicted between another process's choosing and reading
it is computed again there, as on a cold cache.

The other kinds (the tools, asv's results, the warm servers' logs) are not counted: they
are cleared by hand (``layoutbench cache --clear KIND``).
"""

import atexit
import contextlib
import fcntl
import os
import tempfile
from pathlib import Path

from layoutkit.files import cache_folder, cache_root, cache_settings

IN_USE = ".in-use"
CHECKS_PER_LIMIT = 100  # see evict


class _Uses:
    """What this process used of one cache: its list in ``.in-use/`` (held locked, shared, while
    the process lives), and what it added since it last summed the entries (see evict)."""

    def __init__(self):
        self.pid, self.fd, self.names, self.path = os.getpid(), None, set(), None
        self.checked, self.unchecked = False, 0
        try:
            self.fd, temporary = tempfile.mkstemp(dir=cache_folder(IN_USE), prefix=f"{self.pid}-", suffix=".tmp")
        except OSError:  # a cache shared read-only (or on a read-only disk): what no one can write, no one evicts
            return
        fcntl.flock(self.fd, fcntl.LOCK_SH)
        self.path = Path(temporary).with_suffix(".list")
        os.replace(temporary, self.path)  # found by evictions only once locked
        in_use()  # which removes the lists of ended processes: one killed leaves its list behind

    def remove_list(self) -> None:
        """Remove the list, then let go of its lock: no eviction finds it unlocked meanwhile."""
        if self.fd is not None:
            self.path.unlink(missing_ok=True)
            os.close(self.fd)
            self.fd = None


_uses: dict[str, _Uses] = {}  # by cache root


def _this_process() -> _Uses:
    _forget_inherited()
    root = str(cache_root())
    if root not in _uses:
        _uses[root] = _Uses()
    return _uses[root]


def _forget_inherited() -> None:
    """Drop the lists a forked child inherited: they stay their parents'."""
    for root, uses in list(_uses.items()):
        if uses.pid != os.getpid():
            if uses.fd is not None:
                os.close(uses.fd)
            del _uses[root]


@atexit.register
def release() -> None:
    """This process uses no entry any longer: its lists are removed. At its exit, and where a
    process ends without running ``atexit`` (a sweep's worker, ended by multiprocessing's
    ``os._exit``), as its work ends."""
    _forget_inherited()
    while _uses:
        _uses.popitem()[1].remove_list()


def mark_used(kind: str, key: str) -> None:
    """Note that this process uses ``kind``'s entry ``key``: no eviction removes it while this
    process lives."""
    uses, name = _this_process(), f"{kind}/{key}"
    if name not in uses.names and uses.fd is not None:
        uses.names.add(name)
        os.write(uses.fd, f"{name}\n".encode())


def in_use() -> set[str]:
    """The entries (``kind/key``) that running processes used; the lists of ended ones are removed."""
    names = set()
    folder = cache_root() / IN_USE
    for path in folder.glob("*.list") if folder.is_dir() else []:
        try:
            with open(path, "rb") as listed:
                try:
                    fcntl.flock(listed, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:  # its process lives
                    names.update(listed.read().decode(errors="replace").split())
                    continue
                path.unlink(missing_ok=True)
        except FileNotFoundError:  # an ended process's, removed by another meanwhile
            continue
    return names


def evict(kinds, added: int) -> None:
    """Where the entries of ``kinds`` hold more than this process's limit, remove the least
    recently used that no running process uses until they fit. Summing them costs about 10 us
    an entry (30 ms for 3,000 records), so a process does it when it first adds an entry, then
    each time it has added another :data:`CHECKS_PER_LIMIT`-th of the limit (``added``: bytes just
    added): the cache exceeds its limit by at most that much per process at work."""
    uses, limit = _this_process(), cache_settings().max_size
    if limit is None:
        return
    uses.unchecked += added
    if uses.checked and uses.unchecked < limit // CHECKS_PER_LIMIT:
        return
    uses.checked, uses.unchecked = True, 0
    entries = [(status.st_mtime, status.st_size, f"{kind}/{entry.name}", entry.path)
               for kind in kinds for entry, status in kind_files(kind)]
    total = sum(size for _, size, _, _ in entries)
    if total <= limit:
        return
    used = in_use()
    for _, size, name, path in sorted(entries):
        if total <= limit:
            break
        if name not in used:
            Path(path).unlink(missing_ok=True)
            total -= size


def kind_files(kind: str, hidden: bool = False):
    """(a :class:`os.DirEntry`, its status) of each file in ``kind``'s folder, passing over one
    removed meanwhile; the locks and writers' temporary files (named ``.*``) only where ``hidden``."""
    directory = cache_root() / kind
    with os.scandir(directory) if directory.is_dir() else contextlib.nullcontext([]) as listing:
        for entry in listing:
            if entry.name.startswith(".") and not hidden:
                continue
            try:
                status = entry.stat()
            except FileNotFoundError:  # evicted, or renamed into place, meanwhile
                continue
            yield entry, status
