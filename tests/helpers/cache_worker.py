"""A process that fills one cache entry, for the concurrent-writers test (imports nothing heavy)."""

import time
from pathlib import Path

from harness.cache import DiskCache
from layoutkit.files import CacheSettings, install


def fill(cache_dir: str, key: str, marker: str, log: str, barrier) -> bytes:
    """Wait for the other process, then fill ``key``; computing takes a second and appends
    ``marker`` to ``log``."""
    install(CacheSettings(Path(cache_dir)))

    def compute():
        with open(log, "a") as out:
            out.write(marker + "\n")
        time.sleep(1)
        return marker.encode() * 1_000_000

    barrier.wait()
    value, _ = DiskCache("test").get_or_create(key, compute, lambda v: v, lambda b: b)
    return value
