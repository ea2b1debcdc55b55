"""``layoutbench explore`` run as a user runs it, in a process of its own, until its Model
Explorer answers on a free local port (or Model Explorer alone, on files it wrote); its files,
address and server API for the tests."""

import contextlib
import json
import os
import queue
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Explorer:
    """A running ``explore``: the page's address, the ETRecord and the overlay files it wrote."""

    address: str
    etrecord: Path
    overlays: list[Path]

    @property
    def root(self) -> str:
        parts = urllib.parse.urlsplit(self.address)
        return f"{parts.scheme}://{parts.netloc}"

    @property
    def token(self) -> str:
        """The token of the run, which the address carries."""
        return urllib.parse.parse_qs(urllib.parse.urlsplit(self.address).query)["token"][0]

    def api(self, route: str, **query) -> dict:
        """A GET of Model Explorer's server API, as the page asks it (with the run's token)."""
        query = {**query, "token": self.token}
        with urllib.request.urlopen(f"{self.root}{route}?{urllib.parse.urlencode(query)}", timeout=120) as answer:
            return json.load(answer)

    def adapter_graph(self) -> dict:
        """The graph the ETRecord adapter makes of the model: what the page draws."""
        command = {"extensionId": "etrecord_adapter", "cmdId": "convert", "modelPath": str(self.etrecord),
                   "settings": {}, "deleteAfterConversion": False}
        answer = self.api("/api/v1/send_command", json=json.dumps(command))
        assert "error" not in answer, answer
        return answer["graphCollections"][0]["graphs"][0]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def explore(*arguments: str, timeout: float = 900):
    """Run ``layoutbench explore ARGUMENTS --no-browser --port FREE`` until it serves; yields
    an :class:`Explorer`, then ends it as Ctrl-C would."""
    command = [sys.executable, "-m", "harness.cli", "explore", *arguments, "--no-browser", "--port", str(_free_port())]
    with _serving(command, timeout) as printed:
        files = [Path(line) for line in printed if line.startswith("/")]
        yield Explorer(printed[-1], files[0], files[1:])


@contextlib.contextmanager
def serve(etrecord: Path, overlays: list[Path], timeout: float = 300):
    """Model Explorer (:func:`harness.inspection.explorer_server.serve`) showing ``etrecord``
    with some of the overlays ``explore`` wrote; yields an :class:`Explorer`."""
    script = ("import sys; from pathlib import Path; from harness.inspection.explorer_server import serve; "
              "serve(Path(sys.argv[1]), [Path(p) for p in sys.argv[3:]], int(sys.argv[2]), False)")
    command = [sys.executable, "-c", script, str(etrecord), str(_free_port()), *map(str, overlays)]
    with _serving(command, timeout) as printed:
        yield Explorer(printed[-1], etrecord, list(overlays))


@contextlib.contextmanager
def _serving(command: list[str], timeout: float):
    """``command`` running until it prints Model Explorer's address; the lines it printed."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONUNBUFFERED": "1"})
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in process.stdout], daemon=True).start()
    errors: list[str] = []  # drained, so the pipe never fills; shown where it fails
    threading.Thread(target=lambda: errors.extend(process.stderr), daemon=True).start()
    try:
        printed, deadline = [], time.monotonic() + timeout
        while not printed or not printed[-1].startswith("http://"):
            try:
                printed.append(lines.get(timeout=1).strip())
            except queue.Empty:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"{command[:5]} did not serve (exit {process.poll()}); it printed "
                                         f"{printed}; stderr ends {errors[-5:]}") from None
        yield printed
    finally:
        process.terminate()  # the command takes SIGTERM as Ctrl-C
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
