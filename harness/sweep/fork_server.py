"""The process local workers are forked from: it imports torch, ExecuTorch and the harness
once, so a worker starts in milliseconds, not seconds.

This module imports none of that itself, so the command line can start the server before
its own heavy imports (:func:`start_early`): the two import at once on two cores, and the
first worker does not wait for a second round of imports after the sweep is planned.
Last, the server takes what it imported out of the garbage collector's way
(:mod:`harness.sweep.freeze_heap`).
"""

import multiprocessing
import multiprocessing.forkserver

PRELOAD = ["harness.quiet", "harness.sweep.workers", "harness.targets.vulkan.targets",
           "harness.targets.arm.targets", "harness.sweep.freeze_heap"]


def context():
    """The multiprocessing context whose processes start from the fork server."""
    forkserver = multiprocessing.get_context("forkserver")
    forkserver.set_forkserver_preload(PRELOAD)
    return forkserver


def start_early() -> None:
    """Start the fork server now (a no-op once it runs)."""
    context()
    multiprocessing.forkserver.ensure_running()
