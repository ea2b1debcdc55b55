"""Headless Chromium (Debian's ``chromium``, installed by ``make system-deps``): screenshots
and the DOM after scripts ran, of a local file or a page served on localhost."""

import contextlib
import functools
import http.server
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars")
SCRIPT_TIME_MS = 15000  # virtual time a page's scripts get before the shot or the dump


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _address(page: Path | str) -> str:
    return page if isinstance(page, str) else Path(page).resolve().as_uri()


def _chromium(page: Path | str, *flags: str) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run(
            [chromium(), *FLAGS, f"--user-data-dir={profile}", f"--virtual-time-budget={SCRIPT_TIME_MS}",
             *flags, _address(page)],
            check=True, capture_output=True, text=True, timeout=180,
        )


def screenshot(page: Path | str, png: Path, width: int = 1400, height: int = 1800) -> bytes:
    """Open ``page`` (a local file or a URL) and write a PNG of what it shows; returns the PNG bytes."""
    _chromium(page, f"--window-size={width},{height}", f"--screenshot={png}")
    return Path(png).read_bytes()


def rendered_dom(page: Path | str) -> str:
    """The page's HTML after its scripts ran."""
    return _chromium(page, "--dump-dom").stdout


@contextlib.contextmanager
def served(directory: Path):
    """Serve ``directory`` on a free localhost port (pages that fetch their data need http)."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass
