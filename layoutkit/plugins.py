"""How user code is named on the command line, shared by the strategy and model registries.

- ``package.module:Name``: imported from the Python path or the current directory (as
  ``python -m`` would find it);
- ``path/to/file.py:Name``: loaded from that file as it stands, under a module name of its
  own, so an edited copy of an installed module (ExecuTorch's ``tag_memory_meta_pass.py``)
  is measured beside the installed one without reinstalling anything;
- an entry point of a named group (``layoutbench.strategies``, ``layoutbench.models``).

Every failure is a :class:`~layoutkit.errors.UnknownNameError` naming what was wrong.
"""

import hashlib
import importlib
import importlib.util
import os
import sys
from importlib.metadata import entry_points
from pathlib import Path
from types import ModuleType

from layoutkit.errors import UnknownNameError
from layoutkit.source_loader import spec_from_file


def load_module(location: str) -> ModuleType:
    """Import ``package.module``, or load ``path/to/file.py`` under a module name of its own per
    resolved path."""
    if not location.endswith(".py"):
        if os.getcwd() not in sys.path:
            sys.path.append(os.getcwd())  # console scripts do not put it there themselves
        return importlib.import_module(location)
    path = Path(location).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"no file {path}")
    name = f"layoutbench_user_{path.stem}_{hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]}"
    if name in sys.modules:
        return sys.modules[name]
    spec = spec_from_file(name, path)
    module = sys.modules[name] = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def load_object(reference: str, kind: str, known: list[str]):
    """The object ``module:Name`` or ``file.py:Name`` names; one-line errors listing ``known``."""
    location, _, attribute = reference.rpartition(":")
    try:
        module = load_module(location)
    except Exception as error:  # an import runs user code: any error is the user's to see
        raise UnknownNameError(kind, reference, known, f" (cannot import '{location}': {error})") from error
    if not hasattr(module, attribute):
        raise UnknownNameError(kind, reference, known, f" ('{location}' has no '{attribute}')")
    return getattr(module, attribute)


def entry_point_names(group: str) -> dict:
    return {ep.name: ep for ep in entry_points(group=group)}
