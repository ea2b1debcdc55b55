"""The process local workers are forked from: it imports torch, ExecuTorch and the harness
once, so a worker starts in milliseconds, not seconds.

This module imports none of that itself, so the command line can start the server before its
own heavy imports (:func:`start_early`): the two import at once on two cores, and the first
worker does not wait for a second round of imports after the sweep is planned. Last, the
server takes what it imported out of the garbage collector's way (:mod:`.freeze_heap`). A
command that a warm server runs (:mod:`harness.warm`) has those imports already: its workers
fork from the command's own process (:func:`fork_from_here`), with no server.
"""

import importlib
import multiprocessing
import multiprocessing.forkserver
import signal
import threading

from harness import quiet

PRELOAD = ["harness.sweep.orphaned_start", "harness.sweep.workers", "harness.targets.vulkan.targets",
           "harness.targets.arm.targets", "harness.sweep.freeze_heap"]
QUIET_START = "harness.sweep.quiet_start"  # first, in the server of a quiet command
_from_here = False
# Held while a worker is started, and by a thread of this process that draws on the terminal
# (the progress display): a worker forked from here must not inherit a stream locked halfway
# through a draw by a thread it does not have.
FORK_LOCK = threading.Lock()


def fork_from_here() -> None:
    """Fork workers from this process, which has (or will have cheaply: a warm server's
    child) what the fork server would import."""
    global _from_here
    _from_here = True


def context():
    """The multiprocessing context whose processes start from the fork server, or from this
    process (see :func:`fork_from_here`)."""
    if _from_here:
        for name in PRELOAD:
            importlib.import_module(name)
        return multiprocessing.get_context("fork")
    forkserver = multiprocessing.get_context("forkserver")
    forkserver.set_forkserver_preload([QUIET_START, *PRELOAD] if quiet.silenced else PRELOAD)
    _ensure_running()
    return forkserver


def start_early() -> None:
    """Start the fork server now (a no-op once it runs, or where workers fork from here)."""
    if not _from_here:
        context()


def _ensure_running() -> None:
    """Start the fork server with Ctrl-C ignored, which it and every worker forked from it
    inherit: a Ctrl-C is the command's to handle (it ends the workers), where each of them,
    or the server as it imports, would print a KeyboardInterrupt traceback of its own."""
    if threading.current_thread() is not threading.main_thread():  # a Ray task's thread: no terminal
        multiprocessing.forkserver.ensure_running()
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        multiprocessing.forkserver.ensure_running()
    finally:
        signal.signal(signal.SIGINT, previous)
