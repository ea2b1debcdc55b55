"""Model Explorer on a local port, with ExecuTorch's extension (its ETRecord adapter draws the
model) and node data files loaded as overlays: the ``ai-edge-model-explorer`` server, run
until Ctrl-C. The packages are the ``explorer`` extra (``make explorer``), not the pinned
stack: this module imports them only when it starts a server, and says how to get them.
"""

import importlib.util
import sys
from pathlib import Path

from harness.errors import UnavailableError

EXTENSION = "executorch_extension_model_explorer"
INSTALL = "Model Explorer is not installed: make explorer (or pip install -r requirements-explorer.txt)"


def require() -> None:
    """Say in one line how to install Model Explorer where it is missing (before any work)."""
    if importlib.util.find_spec("model_explorer") is None or importlib.util.find_spec(EXTENSION) is None:
        raise UnavailableError(INSTALL)


def _no_version_check(print_msg: bool = True) -> dict:
    return {"version": "", "runningVersion": "", "releaseUrl": "", "desktopAppUrl": ""}


def serve(model: Path, node_data: list[Path], host: str, port: int, open_browser: bool) -> None:
    """Start Model Explorer showing ``model`` with ``node_data`` overlays; returns on Ctrl-C.
    It prints its address (``http://HOST:PORT/?data=...``) once it answers."""
    require()
    import model_explorer
    from model_explorer import server

    # Its check for a newer release asks PyPI and GitHub from a thread the process then waits
    # for at exit: a local viewer asks the network nothing.
    server._check_new_version = _no_version_check
    config = model_explorer.config().add_model_from_path(str(model))
    for path in node_data:
        config.add_node_data_from_path(str(path))
    sys.stdout.flush()
    model_explorer.visualize_from_config(config, host=host, port=port, extensions=[EXTENSION],
                                         no_open_in_browser=not open_browser)
