"""Library chatter (warnings, logging, torch's C++ log) off unless ``--verbose``, and what
they print kept off stdout (:func:`output_to_stderr`), which carries only results.

Where a process starts (the command line, the asv suites), it calls :func:`apply` before the
libraries are imported, handing in the environment its native libraries and the processes
it starts read. The workers' fork server of a quiet process imports
:mod:`harness.sweep.quiet_start` first, so it and the workers forked from it are as quiet.
"""

import contextlib
import logging
import os
import sys
import warnings
from collections.abc import MutableMapping

QUIET_ENV = "LAYOUTBENCH_QUIET"  # 0: the asv suites let the chatter through (benchmarks/__init__.py)
silenced = False  # whether apply silenced this process


def apply(verbose: bool, environment: MutableMapping[str, str] | None = None) -> None:
    """Logs at INFO on stderr where ``verbose``, else warnings and logging off; then, where
    given, ``environment`` (the process's, which its entry hands in) made as quiet for what
    reads it: torch's C++ log as it loads, and the Python processes this one starts."""
    global silenced
    if verbose:
        logging.basicConfig(level=logging.INFO, stream=sys.stderr)
        return
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    silenced = True
    if environment is not None:
        environment["PYTHONWARNINGS"] = "ignore"  # the processes multiprocessing starts (its resource tracker)
        environment.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")  # read as torch loads, here and in children


@contextlib.contextmanager
def output_to_stderr():
    """While active, what Python code and native libraries print to stdout goes to stderr."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
