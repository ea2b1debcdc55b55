"""A test's or a benchmark's own cache, made of the entries it is not about: the suite's exports
and prefixes linked in (keyed by all they depend on: never stale, never another answer), or a
benchmark's copy of the user's entries (hard links, not copies: gigabytes written would load the
run being timed), so its runs start warm where it says."""

import os
import shutil
from pathlib import Path

from layoutkit.files import cache_root


SHARED_KINDS = ("exports", "prefixes")


def with_shared_entries(cache: Path) -> Path:
    """``cache``, a new cache of a test's own (its records, say, start empty), with the suite's
    exports and prefixes linked in, so that it lowers nothing another test lowered."""
    cache.mkdir(mode=0o700, parents=True, exist_ok=True)
    for kind in SHARED_KINDS:
        (cache / kind).symlink_to((cache_root() / kind).resolve())
    return cache


def link_user_caches(cache: Path, *kinds: str) -> None:
    """Link each of the user's cache ``kinds`` that exists into ``cache``."""
    for kind in kinds:
        if (cache_root() / kind).exists():
            shutil.copytree(cache_root() / kind, cache / kind, symlinks=True, copy_function=os.link)
