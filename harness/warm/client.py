"""The client side of the warm server (see :mod:`harness.warm`): hand a command to it
(:func:`forward`), and start, ask and stop it (``layoutbench serve``).

A server that cannot answer at once (stopped, or stuck) holds no one: connecting, handing a
command over and asking it anything each have :data:`ANSWER_TIMEOUT`, after which the command
runs without it, saying so. A command starts only once the client has read the server's
``ready`` and said ``go``: the server never runs a command whose client gave up waiting."""

import contextlib
import hashlib
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

from harness.results.provenance import REPO_ROOT
from harness.warm import encode, ignored_signals, private_folder_problem, process_context
from layoutkit.errors import UsageError, last_line
from layoutkit.files import CacheSettings, cache_folder, cache_root, install, refuse_if_others_can_write

# The command's child leads a process group of its own (its workers are in it), outside the
# terminal's: what a terminal sends its foreground group the client passes on to that group;
# a kill of the client, to the child alone, as it would have reached the command.
TERMINAL_SIGNALS = (signal.SIGINT, signal.SIGQUIT, signal.SIGHUP, signal.SIGWINCH, signal.SIGTSTP, signal.SIGCONT)
START_TIMEOUT = 300  # seconds: the scout and the preload import everything twice, on a loaded machine too
ANSWER_TIMEOUT = 5  # seconds the server may take to accept, read and answer a request (it takes milliseconds)
NO_ANSWER = f"the warm server did not answer within {ANSWER_TIMEOUT} s (stopped, or stuck)"
REPORT_TIMEOUT = 10  # seconds the server may take to report a command that has ended (it takes milliseconds)


class Declined(Exception):
    """The server would not run the command (its message says why); it runs without it."""


class ServerGone(Exception):
    """The server ended while the command ran, or does not report its end, so its exit
    status is unknown."""


def server_files() -> tuple[Path, Path]:
    """The socket of the warm server for this Python, this layoutbench code and this cache,
    and its log (in the cache). The socket lives in a short folder of the user's own: a
    Unix socket's path is limited to about 100 bytes."""
    identity = [os.path.realpath(sys.executable), str(REPO_ROOT), str(cache_root().resolve())]
    digest = hashlib.sha256(json.dumps(identity).encode()).hexdigest()[:16]
    runtime = Path(os.environ.get("XDG_RUNTIME_DIR") or f"/tmp/layoutbench-{os.getuid()}")
    return runtime / f"warm-{digest}.sock", cache_root() / "warm" / f"{digest}.log"


def _connect() -> socket.socket | None:
    """A connection to this code's server (its operations time out after
    :data:`ANSWER_TIMEOUT`), or None where none listens. Raises :class:`Declined` where the
    socket's folder or the process listening is not this user's, or the server does not
    accept at once (a full backlog: it is stopped or stuck)."""
    path, _ = server_files()
    try:
        problem = private_folder_problem(path.parent)
    except FileNotFoundError:
        return None
    if problem:
        raise Declined(problem)
    with contextlib.ExitStack() as closing:  # unless it is returned
        connection = closing.enter_context(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
        connection.settimeout(ANSWER_TIMEOUT)
        try:
            connection.connect(str(path))
            pid, uid, _ = struct.unpack("3i", connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
        except (FileNotFoundError, ConnectionRefusedError):
            return None
        except (BlockingIOError, TimeoutError):
            raise Declined(NO_ANSWER) from None
        except OSError as error:
            raise Declined(f"{path} could not be reached ({error.strerror})") from None
        if uid != os.getuid():
            raise Declined(f"{path} is served by another user's process {pid}")
        closing.pop_all()
        return connection


def _ask(message: dict) -> dict | None:
    """The server's answer to ``message``, or None where none listens; raises
    :class:`Declined` where it does not answer in time."""
    connection = _connect()
    if connection is None:
        return None
    with connection, connection.makefile("rb") as replies:
        try:
            connection.sendall(encode(message))
            line = replies.readline()
        except TimeoutError:
            raise Declined(NO_ANSWER) from None
    return json.loads(line) if line else None


def status() -> dict | None:
    """What the server says of itself (pid, commands served, modules, memory), or None."""
    return _ask({"status": True})


def stop() -> dict | None:
    """Ask the server to end once its running commands have; None where none listens."""
    return _ask({"stop": True})


def start(environment: dict, idle_minutes: float) -> dict:
    """Start a server with ``environment`` (the one it will serve) and wait until it listens;
    its status. Raises RuntimeError with the last line of its log where it ends first."""
    path, log = server_files()
    with _open_log(log) as output:  # with this interpreter's flags (-O...), which commands must share
        process = subprocess.Popen(
            [sys.executable, *subprocess._args_from_interpreter_flags(), "-m", "harness.warm.server", str(path),
             "--idle-minutes", f"{idle_minutes:g}"],
            stdin=subprocess.DEVNULL, stdout=output, stderr=output, env=environment, cwd=REPO_ROOT,
            start_new_session=True)
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        answer = status()
        if answer is not None:
            return answer
        if process.poll() is not None:
            ends = last_line(log.read_text(errors="replace"), "(nothing)")
            raise RuntimeError(f"the warm server ended while starting; its log ({log}) ends: {ends}")
        time.sleep(0.2)
    process.terminate()
    raise RuntimeError(f"the warm server did not listen within {START_TIMEOUT} s (log: {log})")


def _open_log(log: Path):
    """The server's log, opened to append to: never through a link, and refused where another
    user could write it or its folder (see :func:`layoutkit.files.cache_folder`)."""
    cache_folder(log.parent.name)
    try:
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as error:  # ELOOP: a link
        raise UsageError(f"the warm server's log {log} cannot be opened ({error.strerror}); remove it") from None
    output = os.fdopen(fd, "a")
    try:
        refuse_if_others_can_write(log, os.fstat(fd))
    except BaseException:
        output.close()
        raise
    return output


def forward(entry: str, argv: list[str]) -> int | None:
    """Run ``entry`` (``module:function`` of argv, returning an exit code) in the server with
    this process's arguments, directory, environment and standard streams; its exit code, or
    None where no server listens. Raises :class:`Declined` or :class:`ServerGone`."""
    try:
        cwd = os.getcwd()
    except FileNotFoundError:  # the directory was removed: the command says so itself
        return None
    environment = dict(os.environ)
    install(CacheSettings.from_environment(environment))  # the cache it names says which server (server_files)
    connection = _connect()
    if connection is None:
        return None
    umask = os.umask(0)
    os.umask(umask)
    request = encode({"entry": entry, "argv": argv, "argv0": sys.argv[0], "cwd": cwd, "env": environment,
                      "path": sys.path, "context": process_context(), "umask": umask, "ignored": ignored_signals(),
                      "blocked": sorted(signal.pthread_sigmask(signal.SIG_BLOCK, []))})
    with connection, connection.makefile("rb") as replies:
        try:
            connection.sendall(request)
            first = json.loads(replies.readline() or b"{}")
            if first.get("ready"):  # from here on the command is the server's to run: no more timeouts
                connection.settimeout(None)
                # The streams go with the go, not before: a server that never reads a request would
                # hold them open (a pipe's reader would wait for ever for its end).
                socket.send_fds(connection, [b"go\n"], [0, 1, 2])
                first = json.loads(replies.readline() or b"{}")
        except TimeoutError:
            raise Declined(NO_ANSWER) from None
        except OSError as error:  # a closed standard stream (EBADF), a server stopping (reset)
            raise Declined(f"the command could not be handed over ({error})") from None
        if "declined" in first:
            raise Declined(first["declined"])
        if "pid" not in first:  # nothing ran: the command can run here
            raise Declined("the warm server did not start the command (its log says why)")
        with _passing_signals_to(first["pid"]), _watching(first["pid"], connection) as stalled:
            last = replies.readline()
    if stalled.is_set():
        raise ServerGone(f"the warm server did not report the command's end within {REPORT_TIMEOUT} s (stopped, or "
                         "stuck): what it finished is kept, its exit status is unknown")
    if not last:
        raise ServerGone("the warm server ended while the command ran; its exit status is unknown")
    code = json.loads(last)["exit"]
    if code < 0:  # the command was killed by a signal: so is this process, as a shell sees it
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        return 128 - code
    return code


@contextlib.contextmanager
def _watching(pid: int, connection: socket.socket):
    """An event set, and the wait for the server's report cut short, where the command has
    ended and the server has not reported it within :data:`REPORT_TIMEOUT` (a stopped server
    cannot even reap its child, which stays a zombie)."""
    stalled, done = threading.Event(), threading.Event()

    def watch() -> None:
        ended_at = None
        while not done.wait(1):
            try:
                ended = psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
            except psutil.NoSuchProcess:  # reaped: the report is on its way
                ended = True
            ended_at = (ended_at or time.monotonic()) if ended else None
            if ended_at is not None and time.monotonic() - ended_at > REPORT_TIMEOUT:
                stalled.set()
                with contextlib.suppress(OSError):
                    connection.shutdown(socket.SHUT_RDWR)  # the wait for the report reads its end
                return

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield stalled
    finally:
        done.set()
        watcher.join()


@contextlib.contextmanager
def _passing_signals_to(pid: int):
    def pass_on(number, frame):
        with contextlib.suppress(ProcessLookupError):
            if number == signal.SIGTERM:
                os.kill(pid, number)
                return
            os.killpg(pid, number)
            if number == signal.SIGTSTP:  # Ctrl-Z: the command stops, and so does this process
                os.kill(os.getpid(), signal.SIGSTOP)

    ignored = ignored_signals()  # by this process's caller (nohup, &): the command ignores them too
    previous = {number: signal.signal(number, pass_on) for number in (*TERMINAL_SIGNALS, signal.SIGTERM)
                if number not in ignored}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
