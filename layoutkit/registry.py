"""How the strategy, model and target registries load their built-ins: each names the
modules that register them, and imports them when it is first asked, so importing a
registry (or a leaf module beside it) stays cheap."""

import importlib


def import_built_ins(modules: tuple[str, ...]) -> None:
    """Import each module of ``modules`` (their decorators register the built-ins); Python
    imports a module once, so a later call costs a dictionary lookup per module."""
    for module in modules:
        importlib.import_module(module)
