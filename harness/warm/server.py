"""The warm server (see :mod:`harness.warm`): ``python -m harness.warm.server SOCKET``.

It learns what to import from a scout: a child that imports every module of layoutbench's
packages and reports the other modules that came with them, in the order they came; the
server imports those, takes them out of the garbage collector's way, notes the files they
came from, and listens. One thread: a selector over the listening socket, the connections
and the running commands' pidfds; no connection is waited on, so a slow client holds no
other, and one that has not finished its request within :data:`REQUEST_TIMEOUT` is dropped.
A request is one JSON line; the reply is ``{"ready": true}`` or ``{"declined": WHY}``; on the
client's ``go`` line, which brings its standard streams, the command's child is forked and
the reply is ``{"pid": N}``, then ``{"exit": CODE}`` when it ends. A client that gave up before
its ``go`` has no command run; one that goes away later ends its command (SIGTERM), as a
closed terminal would; a command's child ends with the server (PR_SET_PDEATHSIG).
"""

import argparse
import contextlib
import fcntl
import json
import os
import selectors
import signal
import socket
import sys
import time
import traceback
from pathlib import Path

from harness.warm import differences, encode, environment_difference, private_folder_problem, process_context
from harness.warm.command_process import run_command
from harness.warm.preload import ImportedFiles, ours, preload, scout

REQUEST_TIMEOUT = 5  # seconds a connected client may take to send its request, and then its go
MAX_REQUEST = 1 << 22
READ_BYTES = 1 << 16  # a request (its environment, mostly) is read in pieces of this, up to MAX_REQUEST


class _Request:
    """A connection whose request is being read (then, for a command, its client's go), with
    the standard streams that came with it, until a deadline."""

    def __init__(self, connection: socket.socket):
        self.connection = connection
        self.data = b""
        self.fds: list[int] = []
        self.request: dict | None = None  # once read, a command waiting for its client's go
        self.deadline = time.monotonic() + REQUEST_TIMEOUT

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds = []
        self.connection.close()


class _Command:
    """A connection and the command it asked for."""

    def __init__(self, connection: socket.socket, pid: int, pidfd: int):
        self.connection, self.pid, self.pidfd = connection, pid, pidfd
        self.ended_by_client = False
        self.done = False


class WarmServer:
    def __init__(self, path: Path, idle_seconds: float, environment: dict, lock_fd: int):
        self.path, self.idle_seconds, self.environment = path, idle_seconds, environment
        self.context = json.loads(json.dumps(process_context()))  # as a request carries it
        self.lock_fd = lock_fd  # held for the server's life; not a command's
        self.started = time.time()
        self.last_active = time.monotonic()
        self.served = 0
        self.selector = selectors.DefaultSelector()
        self.requests: dict[int, _Request] = {}  # by connection fd
        self.commands: dict[int, _Command] = {}  # by connection fd
        self.files = ImportedFiles()
        self.listener: socket.socket | None = None
        self.leaving: str | None = None  # why it no longer accepts: "stop" or "restart"

    def start(self, names: list[str]) -> None:
        self.files = preload(names)
        self.path.unlink(missing_ok=True)
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(self.path))
        self.listener.listen(socket.SOMAXCONN)
        self.selector.register(self.listener, selectors.EVENT_READ, self._accept)

    def serve(self) -> str:
        """Serve until stopped, idle too long, or stale; why it ended."""
        while True:
            for key, _ in self.selector.select(timeout=1.0):
                try:
                    key.data(key.fileobj)
                except Exception:  # one connection's trouble (EMFILE) must not end the rest
                    traceback.print_exc()
            for request in [r for r in self.requests.values() if time.monotonic() > r.deadline]:
                self._drop(request, f"not finished within {REQUEST_TIMEOUT} s")
            if self.commands or self.requests:
                continue
            if self.leaving:
                return self.leaving
            if time.monotonic() - self.last_active > self.idle_seconds:
                self._stop_listening()
                return "idle"

    def _stop_listening(self) -> None:
        if self.listener is not None:
            self.selector.unregister(self.listener)
            self.listener.close()
            self.listener = None
            self.path.unlink(missing_ok=True)

    def _accept(self, listener: socket.socket) -> None:
        connection, _ = listener.accept()
        self.last_active = time.monotonic()
        connection.setblocking(False)
        request = _Request(connection)
        self.requests[connection.fileno()] = request
        self.selector.register(connection, selectors.EVENT_READ, lambda _: self._receive(request))

    def _forget(self, request: _Request) -> None:
        """No longer a request of this server's (its connection stays open)."""
        if self.requests.pop(request.connection.fileno(), None) is not None:
            self.selector.unregister(request.connection)

    def _drop(self, request: _Request, why: str | None = None) -> None:
        if why:
            print(f"warm server: a request not served ({why})", file=sys.stderr)
        self._forget(request)
        request.close()

    def _receive(self, request: _Request) -> None:
        """Read what the client sent; act on each line it completes."""
        try:
            data, fds, _, _ = socket.recv_fds(request.connection, READ_BYTES, 3)
        except BlockingIOError:
            return
        except OSError:
            data, fds = b"", []
        request.fds += fds
        if not data:  # the client gave up, or went away
            self._drop(request)
            return
        request.data += data
        if len(request.data) > MAX_REQUEST or len(request.fds) > 3:
            self._drop(request, "too large")
            return
        try:
            while b"\n" in request.data and request.connection.fileno() in self.requests:
                line, _, request.data = request.data.partition(b"\n")
                self._line(request, line)
        except (OSError, KeyError, TypeError, ValueError) as error:  # the client went away, or a bad request
            self._drop(request, f"{type(error).__name__}: {error}")

    def _line(self, request: _Request, line: bytes) -> None:
        if request.request is not None:  # a command's client, ready for it
            if line != b"go":
                raise ValueError("a line other than go")
            if len(request.fds) != 3:
                self._reply(request, {"declined": "the command's standard streams did not come with it"})
                return
            self._forget(request)
            try:
                self._fork(request.connection, request.request, request.fds)
            finally:  # the child has its own copies
                for fd in request.fds:
                    os.close(fd)
                request.fds = []
            return
        message = json.loads(line)
        if "status" in message:
            self._reply(request, self.status())
        elif "stop" in message:
            self.leaving = "stop"
            self._stop_listening()
            self._reply(request, {"stopping": len(self.commands)})
        else:
            why = self._why_not(message)
            if why:
                self._reply(request, {"declined": why})
            else:
                request.request = message
                request.deadline = time.monotonic() + REQUEST_TIMEOUT
                request.connection.sendall(encode({"ready": True}))

    def _reply(self, request: _Request, answer: dict) -> None:
        """The last message of a connection (a few hundred bytes: a new socket's buffer takes it whole)."""
        self._forget(request)
        try:
            request.connection.sendall(encode(answer))
        finally:
            request.close()

    def _why_not(self, request: dict) -> str | None:
        changed = self.files.changed()
        if changed:
            self.leaving = "restart"
            self._stop_listening()
            return f"{changed} changed since the server imported it; it starts again"
        for what, differ in (("environment", environment_difference(self.environment, request["env"])),
                             ("process context", differences(self.context, request["context"]))):
            if differ:
                shown = ", ".join(differ[:3]) + (f" and {len(differ) - 3} more" if len(differ) > 3 else "")
                return f"the {what} differs from the server's ({shown}); `layoutbench serve --stop` and serve again"
        return None

    def _fork(self, connection: socket.socket, request: dict, fds: list[int]) -> None:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        server_pid = os.getpid()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                self.selector.close()
                if self.listener is not None:
                    self.listener.close()
                for command in self.commands.values():
                    command.connection.close()
                    os.close(command.pidfd)
                for other in self.requests.values():
                    other.close()
                os.close(self.lock_fd)
                connection.close()
                code = run_command(request, fds, server_pid)
            finally:
                os._exit(code if isinstance(code, int) else 1)
        try:
            pidfd = os.pidfd_open(pid)
        except OSError:  # (out of descriptors) a command the server cannot follow must not run
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise
        self.served += 1
        command = _Command(connection, pid, pidfd)
        self.commands[connection.fileno()] = command
        self.selector.register(connection, selectors.EVENT_READ, lambda _: self._client_input(command))
        self.selector.register(command.pidfd, selectors.EVENT_READ, lambda _: self._ended(command))
        with contextlib.suppress(OSError):  # a client gone already: its connection's end says so
            connection.sendall(encode({"pid": pid}))

    def _client_input(self, command: _Command) -> None:
        if command.done:  # ended in the same round of events
            return
        try:
            data = command.connection.recv(4096)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data and not command.ended_by_client:  # the client is gone: end its command
            command.ended_by_client = True
            self.selector.unregister(command.connection)
            os.kill(command.pid, signal.SIGTERM)

    def _ended(self, command: _Command) -> None:
        command.done = True
        _, status = os.waitpid(command.pid, 0)
        self.selector.unregister(command.pidfd)
        os.close(command.pidfd)
        if not command.ended_by_client:
            self.selector.unregister(command.connection)
            with contextlib.suppress(OSError):
                command.connection.setblocking(True)
                command.connection.sendall(encode({"exit": os.waitstatus_to_exitcode(status)}))
        del self.commands[command.connection.fileno()]
        command.connection.close()
        self.last_active = time.monotonic()

    def status(self) -> dict:
        with open("/proc/self/status") as status:
            resident = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmRSS:"))
        return {"pid": os.getpid(), "started": self.started, "served": self.served, "running": len(self.commands),
                "modules": len(self.files), "own_modules": sorted(filter(ours, sys.modules)),
                "resident_bytes": resident, "idle_seconds": self.idle_seconds}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.warm.server")
    parser.add_argument("socket", type=Path)
    parser.add_argument("--idle-minutes", type=float, default=30.0)
    args = parser.parse_args(argv)
    environment = dict(os.environ)
    # As a quiet command sets it before torch reads it at import (--verbose commands run cold).
    os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
    args.socket.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    problem = private_folder_problem(args.socket.parent)  # whoever can connect runs commands as this user
    try:
        os.close(os.pidfd_open(os.getpid()))
    except OSError as error:  # the server follows its commands through pidfds (Linux 5.3)
        problem = f"pidfd_open is not available here ({error.strerror})"
    if problem:
        print(f"warm server: {problem}", file=sys.stderr)
        return 2
    with open(args.socket.with_suffix(".lock"), "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print("warm server: another one serves this socket", file=sys.stderr)
            return 0
        server = WarmServer(args.socket, args.idle_minutes * 60, environment, lock.fileno())
        start = time.monotonic()
        server.start(scout())
        print(f"warm server: {len(server.files)} module files imported in {time.monotonic() - start:.1f} s; "
              f"listening on {args.socket}", file=sys.stderr, flush=True)
        why = server.serve()
        print(f"warm server: ended ({why}) after {server.served} commands", file=sys.stderr, flush=True)
    if why == "restart":
        os.environ.clear()
        os.environ.update(environment)
        os.execv(sys.executable, [sys.executable, "-m", "harness.warm.server", *(argv or sys.argv[1:])])
    return 0


if __name__ == "__main__":
    sys.exit(main())
