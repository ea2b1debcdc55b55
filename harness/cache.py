"""Where layoutbench keeps what it can recompute: exports, npm tarballs."""

import os
from pathlib import Path


def cache_root() -> Path:
    """``$LAYOUTBENCH_CACHE_DIR``, else ``~/.cache/layoutbench``."""
    return Path(os.environ.get("LAYOUTBENCH_CACHE_DIR") or Path.home() / ".cache" / "layoutbench")
