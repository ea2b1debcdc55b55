"""How the strategy, model and target registries load their built-ins, one way for all
three: when a registry is first asked, it imports the modules of its package that may
register something (their decorators do the registering). So a new built-in is one module
in the right place, and importing a registry (or a leaf module beside it) stays cheap."""

import importlib
import pkgutil
from typing import Callable

_loaded: set[str] = set()  # the packages whose built-ins are imported


def import_built_ins(package: str, registers: Callable[[str], bool]) -> bool:
    """Import every module under ``package`` whose name relative to it ``registers`` accepts
    (once per process); True on the call that imported them."""
    if package in _loaded:
        return False
    _loaded.add(package)  # first: a built-in that asks its registry while it is imported must not recurse
    root = importlib.import_module(package)
    for module in pkgutil.walk_packages(root.__path__, prefix=f"{package}."):
        if registers(module.name.removeprefix(f"{package}.")):
            importlib.import_module(module.name)
    return True


def direct_public_module(relative: str) -> bool:
    """A module directly in the package whose name does not start with an underscore."""
    return "." not in relative and not relative.startswith("_")
