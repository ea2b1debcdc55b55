"""Library chatter (warnings, logging, torch's C++ log) off unless ``--verbose``, and what
they print kept off stdout (:func:`output_to_stderr`), which carries only results.

The command line calls :func:`apply` before the libraries are imported and leaves
``LAYOUTBENCH_QUIET=1`` in the environment; worker processes import this module first
(their fork server preloads it), so they are as quiet as the command that started them.
"""

import contextlib
import logging
import os
import sys
import warnings

QUIET_ENV = "LAYOUTBENCH_QUIET"


def apply(verbose: bool) -> None:
    if verbose:
        logging.basicConfig(level=logging.INFO, stream=sys.stderr)
        os.environ[QUIET_ENV] = "0"
        return
    warnings.filterwarnings("ignore")
    os.environ["PYTHONWARNINGS"] = "ignore"  # the processes multiprocessing starts (its resource tracker)
    logging.disable(logging.WARNING)
    os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
    os.environ[QUIET_ENV] = "1"


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


if os.environ.get(QUIET_ENV) == "1":
    apply(verbose=False)
