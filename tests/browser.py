"""Headless Chromium (Debian's ``chromium``, installed by ``make system-deps``) for screenshots."""

import shutil
import subprocess
import tempfile
from pathlib import Path

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars")


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def screenshot(page: Path, png: Path, width: int = 1400, height: int = 1800) -> bytes:
    """Open ``page`` (a local file) and write a PNG of what it shows; returns the PNG bytes."""
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run(
            [chromium(), *FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}",
             f"--screenshot={png}", Path(page).resolve().as_uri()],
            check=True, capture_output=True, timeout=120,
        )
    return Path(png).read_bytes()
