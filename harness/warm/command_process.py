"""A command's child of the warm server (:mod:`harness.warm.server`), made into the process a
new Python started by the client would be: its standard streams, directory, environment,
umask, signals and random state; then the command's entry function and what the interpreter
runs at exit."""

import atexit
import ctypes
import importlib
import io
import os
import random
import signal
import sys
import traceback

from harness.warm import CATCHABLE_SIGNALS

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


def run_command(request: dict, fds: list[int], server_pid: int) -> int:
    """In the command's child: become the client's process (its streams, directory,
    environment, umask; a process group of its own, the client's signals reach), run its
    entry function, then what the interpreter runs at exit."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != server_pid:  # the server ended before the line above
        return 1
    os.setpgid(0, 0)
    _signals_as_a_new_process(request["ignored"], request["blocked"])
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


def _signals_as_a_new_process(ignored: list[int], blocked: list[int]) -> None:
    """The signal dispositions and mask a new Python started by the client would have: what
    the client ignores (its caller's ``nohup`` or ``&``, Python's SIGPIPE) ignored, SIGINT
    raising KeyboardInterrupt, every other signal's default; the client's blocked signals."""
    for number in CATCHABLE_SIGNALS:
        signal.signal(number, signal.SIG_IGN if number in ignored
                      else signal.default_int_handler if number == signal.SIGINT else signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


def _fresh_random_state() -> None:
    """Random generators seeded anew, as in a new process (not the server's state, shared by every command)."""
    random.seed()
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()
    if "torch" in sys.modules:
        sys.modules["torch"].seed()  # a new process's default generator is seeded at random too
