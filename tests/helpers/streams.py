"""A child process's output read as it comes, with bounded waits."""

import queue
import threading
import time


def lines_of(stream) -> queue.Queue:
    """The lines of ``stream`` as they come (None at its end), read by a thread of their own."""
    lines: queue.Queue = queue.Queue()

    def read() -> None:
        for line in stream:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    return lines


def rest_of(lines: queue.Queue, timeout: float) -> list[str]:
    """The lines of ``lines`` to its end, which must come within ``timeout`` seconds."""
    rest = []
    while (line := lines.get(timeout=timeout)) is not None:
        rest.append(line)
    return rest


def wait_for_line(lines: queue.Queue, text: str, timeout: float) -> bool:
    """Whether a line holding ``text`` comes within ``timeout`` seconds, before the stream ends."""
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        try:
            line = lines.get(timeout=left)
        except queue.Empty:
            return False
        if line is None:
            return False
        if text in line:
            return True
    return False
