"""Where layoutbench keeps what it can recompute (:func:`cache_root`), and the lock file
through which processes take turns at a cache entry or a results directory (:func:`file_lock`)."""

import contextlib
import fcntl
import os
from pathlib import Path


def cache_root() -> Path:
    """``$LAYOUTBENCH_CACHE_DIR``, else ``~/.cache/layoutbench``."""
    return Path(os.environ.get("LAYOUTBENCH_CACHE_DIR") or Path.home() / ".cache" / "layoutbench")


@contextlib.contextmanager
def file_lock(path: Path, wait: bool = True):
    """An exclusive lock on ``path`` (created, with its folder, where missing) while in the
    block, which gets the lock file open for reading and writing. Held by another process:
    wait for it, or with ``wait=False`` raise :class:`BlockingIOError`. The kernel lets go
    of it when its process ends, however it ends, so a killed holder blocks no one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        try:
            yield handle
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
