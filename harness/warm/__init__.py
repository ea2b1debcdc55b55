"""A warm server: a Python process that has imported torch, ExecuTorch and every other
library the command line uses, once, and runs each command in a child forked from it, so a
command starts in milliseconds instead of the seconds those imports take.

``layoutbench serve`` starts one (:mod:`harness.warm.server`); from then on the
``layoutbench`` executable hands each command to it (:mod:`harness.warm.client`) with its
arguments, working directory, environment and standard streams, and exits as the command
does. Of layoutbench's code the server imports only this package (and, with ``harness``,
:mod:`layoutkit.source_loader`, through which each command imports the rest from its
source, afresh in its child: an edited strategy is the one measured). The files it did
import are checked before every command; where one changed (an upgraded package), it
declines, the command runs without it, and it starts again. A command runs without it too
where its result could differ: another environment (variables libraries read at import),
another process context (CPU affinity, niceness, resource limits: ``taskset``, ``nice``,
``ulimit``; the interpreter's flags: ``python -O``), or ``--verbose`` (what libraries print
at import belongs to the command). The command's child ignores and blocks the signals the
caller does (``nohup``, ``&`` in a script), and its random generators (torch's too) are
seeded anew, as a new process's are. A cgroup is not compared (each terminal of a desktop
session may have its own): a command that must run under a cgroup's limits
(``systemd-run -p ...``) sets ``LAYOUTBENCH_NO_SERVER=1``.

What the client and the server share is here; it imports nothing of layoutbench, since the
server imports it.
"""

import json
import os
import resource
import signal
import stat
import sys
from pathlib import Path

# Variables a command may set differently from the server's: layoutbench's own (read by its
# code, which every command imports afresh) and what a shell sets per command or terminal.
PER_COMMAND_VARIABLES = ("PWD", "OLDPWD", "SHLVL", "_", "COLUMNS", "LINES")
PER_COMMAND_PREFIX = "LAYOUTBENCH_"


def differences(ours: dict, theirs: dict) -> list[str]:
    """The keys whose values differ between two dicts (a key only one has among them)."""
    return sorted(name for name in ours.keys() | theirs.keys() if ours.get(name) != theirs.get(name))


def environment_difference(ours: dict, theirs: dict) -> list[str]:
    """The variables, other than per-command ones, set differently in two environments."""
    return [name for name in differences(ours, theirs)
            if name not in PER_COMMAND_VARIABLES and not name.startswith(PER_COMMAND_PREFIX)]


def encode(message: dict) -> bytes:
    """One protocol message: a line of JSON."""
    return json.dumps(message).encode() + b"\n"


def process_context() -> dict:
    """What a process inherits besides its environment that can change what a command does
    or how fast: CPU affinity, niceness, resource limits, the interpreter's flags (``-O``,
    ``-X``, ``-W``...)."""
    limits = {name: list(resource.getrlimit(getattr(resource, name))) for name in dir(resource)
              if name.startswith("RLIMIT_")}
    flags = {name: getattr(sys.flags, name) for name in type(sys.flags).__match_args__}
    return {"affinity": sorted(os.sched_getaffinity(0)), "niceness": os.getpriority(os.PRIO_PROCESS, 0),
            "limits": limits, "interpreter flags": {**flags, "-X": sys._xoptions, "-W": sys.warnoptions}}


# Every signal whose disposition a process can set (SIGKILL's and SIGSTOP's cannot be).
CATCHABLE_SIGNALS = [number for number in signal.Signals if number not in (signal.SIGKILL, signal.SIGSTOP)]


def ignored_signals() -> list[int]:
    """The signals this process ignores (a caller's ``nohup`` or ``&``, and Python's own SIGPIPE)."""
    return [number for number in CATCHABLE_SIGNALS if signal.getsignal(number) == signal.SIG_IGN]


def private_folder_problem(folder: Path) -> str | None:
    """Why ``folder`` cannot hold the socket (whoever can reach it runs commands as this
    user), or None: it must be a directory, not a link, this user's, closed to others."""
    status = os.lstat(folder)
    if not stat.S_ISDIR(status.st_mode) or status.st_uid != os.getuid() or status.st_mode & 0o077:
        return f"{folder} must be a directory of this user's, closed to others (chmod 700), not a link"
    return None
