"""A worker whose sweep died while handing it its job ends without a traceback.

A worker forked from the fork server first reads its job from the sweep (multiprocessing's
``spawn._main``). A sweep killed at that moment (SIGKILL, which it cannot hold off as it holds
Ctrl-C and SIGTERM) leaves the worker reading an empty pipe, and the fork server's child
prints that ``EOFError`` through ``sys.excepthook``: noise under the sweep's own last line.
Imported by the fork server (its preload), so every worker forked from it has this hook; any
other exception is printed as before.
"""

import sys
import traceback


def _reading_its_job(tb) -> bool:
    return any(frame.f_code.co_name == "_main" and frame.f_code.co_filename.endswith("spawn.py")
               for frame, _ in traceback.walk_tb(tb))


def _unless_orphaned(kind, value, tb, previous=sys.excepthook):
    if issubclass(kind, EOFError) and _reading_its_job(tb):
        return
    previous(kind, value, tb)


sys.excepthook = _unless_orphaned
