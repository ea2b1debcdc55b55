"""Model registry in the style of timm: ``@register_model``, ``create``, ``list_models``.

A registered factory takes no arguments and returns a :class:`ModelSpec`. Names that are
not registered may still resolve through a *family* (``timm:<name>``, ``synthetic:<ops>``),
and any attention model also exists as ``<name>.unfused``.
"""

import fnmatch
from dataclasses import dataclass, field
from typing import Callable

import torch

from harness.errors import UnknownNameError

UNFUSED_SUFFIX = ".unfused"


@dataclass
class ModelSpec:
    """A model ready to export: an eval-mode module and one example input tuple."""

    name: str
    module: torch.nn.Module
    example_inputs: tuple

    @property
    def input_shapes(self) -> list[list[int]]:
        return [list(t.shape) for t in self.example_inputs]


@dataclass
class _Entry:
    factory: Callable[[], ModelSpec]
    zoos: frozenset = field(default_factory=frozenset)


_models: dict[str, _Entry] = {}
_zoo_variants: dict[str, set[str]] = {}  # zoo -> derived names, e.g. "<name>.unfused"
_families: dict[str, Callable[[str], ModelSpec]] = {}


def register_model(fn=None, *, name: str | None = None, zoos=("full",)):
    """Register a factory under its function name (or ``name``) in the given zoos."""

    def decorate(factory):
        key = name or factory.__name__
        _models[key] = _Entry(factory, frozenset(zoos) | {"full"})
        return factory

    return decorate(fn) if fn is not None else decorate


def register_family(prefix: str):
    """Register a resolver for every name of the form ``<prefix>:<argument>``."""

    def decorate(resolver):
        _families[prefix] = resolver
        return resolver

    return decorate


def add_to_zoo(zoo: str, *names: str) -> None:
    """Put derived names (``<name>.unfused``, ``timm:<name>``) in a zoo."""
    _zoo_variants.setdefault(zoo, set()).update(names)
    if zoo != "full":
        add_to_zoo("full", *names)


def list_models(pattern: str = "*", zoo: str | None = None) -> list[str]:
    """Model names matching a glob pattern: all registered ones, or the members of a zoo."""
    if zoo is None:
        names = set(_models)
    else:
        names = {n for n, entry in _models.items() if zoo in entry.zoos}
        names |= _zoo_variants.get(zoo, set())
    return sorted(n for n in names if fnmatch.fnmatch(n, pattern))


def list_zoos() -> list[str]:
    return sorted({zoo for entry in _models.values() for zoo in entry.zoos} | set(_zoo_variants))


def _unfuse_attention(module: torch.nn.Module) -> int:
    """Switch timm's fused SDPA off in every attention module; returns how many."""
    count = 0
    for sub in module.modules():
        if hasattr(sub, "fused_attn"):
            sub.fused_attn = False
            count += 1
    return count


def _unknown(name: str) -> UnknownNameError:
    families = ", ".join(f"{prefix}:<name>" for prefix in sorted(_families))
    return UnknownNameError(
        "model", name, list_models(), f" (also {families}, and <name>{UNFUSED_SUFFIX})"
    )


def create(name: str) -> ModelSpec:
    """Build the model registered (or resolvable) as ``name``."""
    base, unfused = name, name.endswith(UNFUSED_SUFFIX)
    if unfused:
        base = name[: -len(UNFUSED_SUFFIX)]
    if base in _models:
        spec = _models[base].factory()
    elif ":" in base and base.split(":", 1)[0] in _families:
        prefix, argument = base.split(":", 1)
        spec = _families[prefix](argument)
    else:
        raise _unknown(name)
    if unfused and _unfuse_attention(spec.module) == 0:
        raise UnknownNameError(
            "model", name, list_models(), f" ('{base}' has no fused attention to unfuse)"
        )
    spec.name = name
    return spec


def check_model_name(name: str) -> None:
    """Raise UnknownNameError for a name ``create`` could not resolve, without building it."""
    base = name[: -len(UNFUSED_SUFFIX)] if name.endswith(UNFUSED_SUFFIX) else name
    if base in _models:
        return
    if ":" in base and base.split(":", 1)[0] in _families:
        return
    raise _unknown(name)


def resolve_models(names: str | None = None, zoo: str | None = None) -> list[str]:
    """Model names from a comma list or a zoo name, validated."""
    if zoo is not None:
        if zoo not in list_zoos():
            raise UnknownNameError("zoo", zoo, list_zoos())
        return list_models(zoo=zoo)
    chosen = [n.strip() for n in (names or "").split(",") if n.strip()]
    for n in chosen:
        check_model_name(n)
    return chosen
