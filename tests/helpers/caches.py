"""A benchmark's own cache made of the user's entries (hard links, not copies: gigabytes
written would load the run being timed), so its runs start warm where it says."""

import os
import shutil
from pathlib import Path

from layoutkit.files import cache_root


def link_user_caches(cache: Path, *kinds: str) -> None:
    """Link each of the user's cache ``kinds`` that exists into ``cache``."""
    for kind in kinds:
        if (cache_root() / kind).exists():
            shutil.copytree(cache_root() / kind, cache / kind, symlinks=True, copy_function=os.link)
