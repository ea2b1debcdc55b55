"""Versions and machine facts stamped on every record."""

import functools
import platform
import subprocess
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def _package_version(name: str) -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:
        return None


@functools.cache
def harness_commit() -> str:
    """The layoutbench git commit, with ``+dirty`` when the tree has uncommitted changes."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"],
            cwd=REPO_ROOT, capture_output=True, text=True, check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=REPO_ROOT, capture_output=True, text=True, check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return f"v{_package_version('layoutbench') or 'unknown'}"
    return f"{commit}+dirty" if dirty else commit


@functools.cache
def provenance() -> dict:
    return {
        "torch_version": _package_version("torch"),
        "executorch_version": _package_version("executorch"),
        "timm_version": _package_version("timm"),
        "layoutbench_commit": harness_commit(),
        "machine": platform.node(),
        "cpu": platform.processor() or platform.machine(),
        "python_version": platform.python_version(),
    }
