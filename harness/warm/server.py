"""The warm server (see :mod:`harness.warm`): ``python -m harness.warm.server SOCKET``.

It learns what to import from a scout: a child that imports every module of layoutbench's
packages and reports the other modules that came with them, in the order they came; the
server imports those, takes them out of the garbage collector's way, notes the files they
came from, and listens. One thread: a selector over the listening socket, the connections
and the running commands' pidfds. A request is one JSON line and the client's standard
streams; the reply is ``{"pid": N}`` then ``{"exit": CODE}`` when the command's child ends,
or ``{"declined": WHY}``. A client that goes away ends its command (SIGTERM), as a closed
terminal would; a command's child ends with the server (PR_SET_PDEATHSIG).
"""

import argparse
import atexit
import contextlib
import ctypes
import fcntl
import importlib
import io
import json
import os
import random
import selectors
import signal
import socket
import sys
import time
import traceback
from pathlib import Path

from harness.warm import differences, encode, environment_difference, private_folder_problem, process_context
from harness.warm.preload import ImportedFiles, ours, preload, scout

REQUEST_TIMEOUT = 10  # seconds a connected client may take to send its request
MAX_REQUEST = 1 << 22
READ_BYTES = 1 << 16  # a request (its environment, mostly) is read in pieces of this, up to MAX_REQUEST
_PR_SET_PDEATHSIG = 1


def _std_streams(unbuffered: bool) -> None:
    """New standard streams on fds 0-2 (the command's), buffered as Python buffers them
    for what those fds are now (a terminal's stdout by line; none with PYTHONUNBUFFERED)."""
    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        old = getattr(sys, name)
        binary = io.open(fd, "rb", closefd=False) if fd == 0 else io.open(fd, "wb", closefd=False,
                                                                          buffering=0 if unbuffered else -1)
        line_buffering = fd == 2 or (fd == 1 and os.isatty(1))
        stream = io.TextIOWrapper(binary, encoding=old.encoding, errors=old.errors, line_buffering=line_buffering,
                                  write_through=unbuffered and fd > 0)
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)


def _run_command(request: dict, fds: list[int], server_pid: int) -> int:
    """In the command's child: become the client's process (its streams, directory,
    environment, umask; a process group of its own, the client's signals reach), run its
    entry function, then what the interpreter runs at exit."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != server_pid:  # the server ended before the line above
        return 1
    os.setpgid(0, 0)
    for number in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD):
        signal.signal(number, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for target, fd in zip((0, 1, 2), fds):
        os.dup2(fd, target)
        os.close(fd)
    _std_streams(bool(request["env"].get("PYTHONUNBUFFERED")))
    try:  # from here on what goes wrong is said on the command's stderr
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        os.umask(request["umask"])
        sys.path[:] = request["path"]
        sys.argv = [request["argv0"], *request["argv"]]
        _fresh_random_state()
        module, function = request["entry"].split(":")
        code = getattr(importlib.import_module(module), function)(request["argv"])
    except SystemExit as ended:
        code = ended.code
        if isinstance(code, str):
            print(code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    return code or 0


def _fresh_random_state() -> None:
    """Random generators seeded anew, as in a new process (not the server's state, shared by every command)."""
    random.seed()
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()


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
        self.commands: dict[int, _Command] = {}  # by connection fd
        self.files = ImportedFiles()
        self.listener: socket.socket | None = None
        self.leaving: str | None = None  # why it no longer accepts: "stop" or "restart"

    def start(self, names: list[str]) -> None:
        self.files = preload(names)
        self.path.unlink(missing_ok=True)
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(self.path))
        self.listener.listen(16)
        self.selector.register(self.listener, selectors.EVENT_READ, self._accept)

    def serve(self) -> str:
        """Serve until stopped, idle too long, or stale; why it ended."""
        while True:
            for key, _ in self.selector.select(timeout=1.0):
                try:
                    key.data(key.fileobj)
                except Exception:  # one connection's trouble (EMFILE, a bad request) must not end the rest
                    traceback.print_exc()
            if self.commands:
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
        connection.settimeout(REQUEST_TIMEOUT)
        try:
            request, fds = self._read_request(connection)
        except (OSError, ValueError) as error:
            print(f"warm server: a bad request ({error})", file=sys.stderr)
            connection.close()
            return
        try:
            self._answer(connection, request, fds)
        except (OSError, KeyError, TypeError, ValueError) as error:  # the client went away, or a bad request
            print(f"warm server: a request not served ({type(error).__name__}: {error})", file=sys.stderr)
            connection.close()
        finally:
            for fd in fds:
                os.close(fd)

    @staticmethod
    def _read_request(connection: socket.socket) -> tuple[dict, list[int]]:
        data, fds, _, _ = socket.recv_fds(connection, READ_BYTES, 3)
        try:
            while not data.endswith(b"\n"):
                more = connection.recv(READ_BYTES)
                if not more or len(data) > MAX_REQUEST:
                    raise ValueError("incomplete request")
                data += more
            return json.loads(data), list(fds)
        except BaseException:
            for fd in fds:
                os.close(fd)
            raise

    def _answer(self, connection: socket.socket, request: dict, fds: list[int]) -> None:
        if "status" in request:
            connection.sendall(encode(self.status()))
            connection.close()
        elif "stop" in request:
            self.leaving = "stop"
            self._stop_listening()
            connection.sendall(encode({"stopping": len(self.commands)}))
            connection.close()
        else:
            why = self._why_not(request, fds)
            if why:
                connection.sendall(encode({"declined": why}))
                connection.close()
            else:
                self._fork(connection, request, fds)

    def _why_not(self, request: dict, fds: list[int]) -> str | None:
        if len(fds) != 3:
            return "the command's standard streams did not come with it"
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
                os.close(self.lock_fd)
                connection.close()
                code = _run_command(request, fds, server_pid)
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
        connection.setblocking(False)

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
            try:
                command.connection.setblocking(True)
                command.connection.sendall(encode({"exit": os.waitstatus_to_exitcode(status)}))
            except OSError:
                pass
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
