"""Strategy registry in the style of timm: ``@register_strategy``, ``get_strategy``, ``list_strategies``.

A strategy is a subclass of ExecuTorch's ``TagMemoryMetaPass`` that changes only the
decisions. Besides the built-ins registered here, a strategy is found by
``package.module:ClassName`` or through the entry-point group ``layoutbench.strategies``;
either way it then works everywhere a built-in does.

A strategy may define ``summarize(passes) -> dict`` (a classmethod taking the pass
instances of every partition of one model) to add its own fields to the record.
"""

import fnmatch
import importlib
from importlib.metadata import entry_points

from executorch.backends.vulkan._passes.tag_memory_meta_pass import TagMemoryMetaPass

from harness.errors import UnknownNameError

ENTRY_POINT_GROUP = "layoutbench.strategies"

_strategies: dict[str, type] = {}


def _check_strategy_class(name: str, cls) -> type:
    if not (isinstance(cls, type) and issubclass(cls, TagMemoryMetaPass)):
        raise UnknownNameError(
            "strategy",
            name,
            list_strategies(),
            f" ('{name}' is {cls!r}, not a subclass of TagMemoryMetaPass)",
        )
    return cls


def register_strategy(name: str):
    """Class decorator: register a TagMemoryMetaPass subclass under ``name``."""

    def decorate(cls):
        _strategies[name] = _check_strategy_class(name, cls)
        cls.strategy_name = name
        return cls

    return decorate


def _entry_points() -> dict:
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def list_strategies(pattern: str = "*") -> list[str]:
    """Built-in and entry-point strategy names matching a glob pattern."""
    names = set(_strategies) | set(_entry_points())
    return sorted(n for n in names if fnmatch.fnmatch(n, pattern))


def _import_class(path: str) -> type:
    module_name, _, class_name = path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise UnknownNameError(
            "strategy", path, list_strategies(), f" (cannot import '{module_name}': {error})"
        ) from error
    if not hasattr(module, class_name):
        raise UnknownNameError(
            "strategy", path, list_strategies(), f" ('{module_name}' has no '{class_name}')"
        )
    return getattr(module, class_name)


def get_strategy(name: str) -> type:
    """The pass class for a registered name, an entry point, or ``package.module:Class``."""
    if name in _strategies:
        return _strategies[name]
    found = _entry_points().get(name)
    if found is not None:
        cls = _check_strategy_class(name, found.load())
    elif ":" in name:
        cls = _check_strategy_class(name, _import_class(name))
    else:
        raise UnknownNameError("strategy", name, list_strategies(), " (or package.module:Class)")
    if getattr(cls, "strategy_name", None) is None:
        cls.strategy_name = name
    return cls


def resolve_strategies(spec: str) -> list[str]:
    """Strategy names from ``all`` or a comma list; each is checked to resolve."""
    if spec.strip() == "all":
        return list_strategies()
    names = [s.strip() for s in spec.split(",") if s.strip()]
    for name in names:
        get_strategy(name)
    return names


def summarize(cls: type, passes: list) -> dict:
    """The strategy's own record fields for one model, or none."""
    summary = getattr(cls, "summarize", None)
    return dict(summary(passes)) if summary is not None else {}
