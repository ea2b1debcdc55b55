"""Headless Chromium (Debian's ``chromium``, installed by ``make system-deps``): screenshots
and the DOM after scripts ran, of a local file or a page served on localhost; and
:class:`DevTools`, a page driven through the DevTools protocol, for an app that never goes
idle (a server's event stream keeps ``--virtual-time-budget`` from ever ending): it waits
for what a script in the page says, then reads it or takes the shot."""

import base64
import contextlib
import functools
import http.server
import itertools
import json
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.request
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


class DevTools:
    """One headless Chromium tab at ``address``, driven through the DevTools protocol
    (``websocket-client``); use as a context manager, which ends the browser."""

    def __init__(self, address: str, width: int = 1600, height: int = 1000):
        import websocket

        self._profile = tempfile.TemporaryDirectory()
        self._browser = subprocess.Popen(
            [chromium(), *FLAGS, f"--user-data-dir={self._profile.name}", "--remote-debugging-port=0",
             f"--window-size={width},{height}", address],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = Path(self._profile.name) / "DevToolsActivePort"  # Chromium writes its port there
        deadline = time.monotonic() + 60
        while not (port_file.exists() and port_file.read_text().count("\n") >= 1):
            if time.monotonic() > deadline or self._browser.poll() is not None:
                self.close()
                raise RuntimeError("headless Chromium did not open its DevTools port")
            time.sleep(0.1)
        port = port_file.read_text().split()[0]
        targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json", timeout=10))
        page = next(t for t in targets if t["type"] == "page")
        self._socket = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=60,
                                                   suppress_origin=True)
        self._ids = itertools.count(1)

    def command(self, method: str, **params) -> dict:
        """Send one DevTools command; its result (events on the way are dropped)."""
        call = next(self._ids)
        self._socket.send(json.dumps({"id": call, "method": method, "params": params}))
        while True:
            message = json.loads(self._socket.recv())
            if message.get("id") == call:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]

    def navigate(self, address: str) -> None:
        self.command("Page.navigate", url=address)

    def evaluate(self, expression: str):
        """The value of a JavaScript expression in the page (awaited where it is a promise)."""
        result = self.command("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 60.0, interval: float = 0.05) -> float:
        """Seconds until ``expression`` is true in the page (false while it throws, as before
        the page has a body); an AssertionError past ``timeout``."""
        start = time.monotonic()
        while not self.evaluate(f"(() => {{ try {{ return {expression}; }} catch (e) {{ return false; }} }})()"):
            if time.monotonic() - start > timeout:
                raise AssertionError(f"not true after {timeout} s in the page: {expression}")
            time.sleep(interval)
        return time.monotonic() - start

    def screenshot(self, png: Path) -> bytes:
        data = base64.b64decode(self.command("Page.captureScreenshot", format="png")["data"])
        Path(png).write_bytes(data)
        return data

    def close(self) -> None:
        if getattr(self, "_socket", None) is not None:
            self._socket.close()
        self._browser.terminate()
        try:
            self._browser.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._browser.kill()
            self._browser.wait()
        self._profile.cleanup()

    def __enter__(self) -> "DevTools":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
