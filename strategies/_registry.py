"""Strategy registry in the style of timm: ``@register_strategy``, ``get_strategy``, ``list_strategies``.

A strategy is a layout pass with the interface of ExecuTorch's ``TagMemoryMetaPass`` (a
subclass of it, or an edited copy of ExecuTorch's own class loaded from a file) that
changes only the decisions. Besides the built-ins, a strategy is found by
``package.module:ClassName``, ``path/to/file.py:ClassName``, or through the entry-point
group ``layoutbench.strategies``; either way it then works everywhere a built-in does.

A strategy may define ``summarize(passes) -> dict`` (a classmethod taking the pass
instances of every partition of one model) to add its own fields to the record. A strategy
that prices its choices with a device's cost table derives from
:class:`strategies.priced_layout.PricedLayout`: the harness hands it the table when it
constructs the pass, and skips its records where there is none.

The built-ins register themselves when the registry is first asked (it imports every public
module of this package: see :mod:`layoutkit.registry`), so importing this package stays cheap
and a new strategy is one module.
"""

import fnmatch

from costmodel.table import NO_TABLE
from layoutkit.errors import UnavailableError, UnknownNameError, UsageError
from layoutkit.plugins import entry_point_names, load_object
from layoutkit.registry import direct_public_module, import_built_ins
from strategies.priced_layout import PricedLayout

ENTRY_POINT_GROUP = "layoutbench.strategies"

_strategies: dict[str, type] = {}
_unlisted: set[str] = set()  # found by name, left out of listings and ``all``


def _is_layout_pass(cls) -> bool:
    """A TagMemoryMetaPass subclass, or a class with its interface (ExecuTorch's own class
    loaded from an edited copy of its file is an ExportPass, not a subclass of the installed one)."""
    from executorch.backends.vulkan._passes.tag_memory_meta_pass import TagMemoryMetaPass
    from executorch.exir.pass_base import ExportPass

    if not isinstance(cls, type):
        return False
    return issubclass(cls, TagMemoryMetaPass) or (issubclass(cls, ExportPass) and all(
        hasattr(cls, name) for name in ("call", "set_op_node_tensor_reprs")))


def _check_strategy_class(name: str, cls) -> type:
    if not _is_layout_pass(cls):
        raise UnknownNameError("strategy", name, list_strategies(),
                               f" ('{name}' is {cls!r}, not a TagMemoryMetaPass or a layout pass with its interface)")
    return cls


def register_strategy(name: str, listed: bool = True):
    """Class decorator: register a TagMemoryMetaPass subclass under ``name``; an unlisted one
    (a tool's assignment, not a policy to compare) is found by name but not in ``all``."""

    def decorate(cls):
        _strategies[name] = _check_strategy_class(name, cls)
        cls.strategy_name = name
        if not listed:
            _unlisted.add(name)
        return cls

    return decorate


def list_strategies(pattern: str = "*") -> list[str]:
    """Built-in and entry-point strategy names matching a glob pattern."""
    import_built_ins("strategies", direct_public_module)
    names = (set(_strategies) - _unlisted) | set(entry_point_names(ENTRY_POINT_GROUP))
    return sorted(n for n in names if fnmatch.fnmatch(n, pattern))


def get_strategy(name: str) -> type:
    """The pass class for a registered name, an entry point, ``package.module:Class`` or
    ``path/to/file.py:Class``."""
    import_built_ins("strategies", direct_public_module)
    if name in _strategies:
        return _strategies[name]
    found = entry_point_names(ENTRY_POINT_GROUP).get(name)
    if found is not None:
        return _check_strategy_class(name, found.load())
    if ":" in name:
        return _check_strategy_class(name, load_object(name, "strategy", list_strategies()))
    raise UnknownNameError("strategy", name, list_strategies(), " (or package.module:Class, or file.py:Class)")


def is_built_in(name: str) -> bool:
    """Whether strategy ``name`` is one of this package's, whose own record fields (see
    :func:`summarize`) the record schema lists; a plug-in's may be any."""
    return get_strategy(name).__module__.partition(".")[0] == __name__.partition(".")[0]


def unavailable_reason(name: str, costs=None) -> str | None:
    """Why strategy ``name`` cannot run on this host with the cost table ``costs`` (or None),
    or None: a table it prices with is missing, or its class's optional ``check_available()``
    raised (an UnavailableError); asked before anything is lowered."""
    cls = get_strategy(name)
    if costs is None and issubclass(cls, PricedLayout):
        return NO_TABLE
    try:
        getattr(cls, "check_available", lambda: None)()
    except UnavailableError as error:
        return str(error)
    return None


def resolve_strategies(spec: str) -> list[str]:
    """Strategy names from ``all`` or a comma list; each is checked to resolve."""
    if spec.strip() == "all":
        return list_strategies()
    names = [s.strip() for s in spec.split(",") if s.strip()]
    if not names:
        raise UsageError(f"no strategy named in {spec!r}; name one or more, or all (see `layoutbench list strategies`)")
    for name in names:
        get_strategy(name)
    return names


def summarize(cls: type, passes: list) -> dict:
    """The strategy's own record fields for one model, or none."""
    summary = getattr(cls, "summarize", None)
    return dict(summary(passes)) if summary is not None else {}
