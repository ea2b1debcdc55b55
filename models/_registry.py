"""Model registry in the style of timm: ``@register_model``, ``create``, ``list_models``.

A registered factory takes no arguments and returns a :class:`ModelSpec`. Names that are
not registered may still resolve:

- through a *family* (``timm:<name>``, ``synthetic:<ops>``); a family with a catalog (timm:
  every architecture timm lists) is also a zoo of that name, and globs select from it
  (``timm:*vit*``);
- as a user's factory, ``package.module:factory`` or ``path/to/file.py:factory``, or an
  entry point of the group ``layoutbench.models``; the factory returns a ModelSpec or a
  ``(module, example_inputs)`` pair;
- as a program saved with ``torch.export.save`` (``path/to/model.pt2``), measured as saved.

Variants, as suffixes of any of these (``deit_tiny_patch16_224.unfused.int8``), are
:mod:`models.variants`'. A factory may also return a module that is already exported or
quantized; it is measured as it is.
"""

import fnmatch
import inspect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch

from models.variants import INT8_SUFFIX, UNFUSED_SUFFIX, split_variants
from layoutkit.errors import InvalidModelError, UnknownNameError, UsageError
from layoutkit.plugins import entry_point_names, load_object
from layoutkit.registry import direct_public_module, import_built_ins
from layoutkit.source_loader import files_digest

ENTRY_POINT_GROUP = "layoutbench.models"
SAVED_PROGRAM_SUFFIX = ".pt2"
WEIGHT_SEED = 0  # see create()
ZOO_DIR = Path(__file__).resolve().parent


@dataclass
class ModelSpec:
    """A model ready to export: an eval-mode module and one example input tuple.

    ``exported`` is set for a saved program, which is measured as it is (not re-exported);
    ``source_digest`` changes whenever the code or file that defines the model changes."""

    name: str
    module: torch.nn.Module
    example_inputs: tuple
    exported: torch.export.ExportedProgram | None = None
    source_digest: str = ""

    @property
    def input_shapes(self) -> list[list[int]]:
        return [list(t.shape) for t in self.example_inputs]


@dataclass
class _Entry:
    factory: Callable[[], ModelSpec]
    zoos: frozenset = field(default_factory=frozenset)


_models: dict[str, _Entry] = {}
_zoo_variants: dict[str, set[str]] = {}  # zoo -> derived names, e.g. "<name>.unfused", "<name>.int8"
_families: dict[str, Callable[[str], ModelSpec]] = {}
_family_checks: dict[str, Callable[[str], None]] = {}
_family_catalogs: dict[str, Callable[[], list[str]]] = {}
_GLOB = set("*?[")


def register_model(fn=None, *, name: str | None = None, zoos=("full",)):
    """Register a factory under its function name (or ``name``) in the given zoos."""

    def decorate(factory):
        key = name or factory.__name__
        _models[key] = _Entry(factory, frozenset(zoos) | {"full"})
        return factory

    return decorate(fn) if fn is not None else decorate


def register_family(prefix: str, check: Callable[[str], None] | None = None,
                    catalog: Callable[[], list[str]] | None = None):
    """Register a resolver for every name of the form ``<prefix>:<argument>``; ``check``
    rejects a bad argument without building anything (names are checked before a sweep);
    ``catalog`` lists every argument the family has (it becomes the zoo ``<prefix>``)."""

    def decorate(resolver):
        _families[prefix] = resolver
        if check is not None:
            _family_checks[prefix] = check
        if catalog is not None:
            _family_catalogs[prefix] = catalog
        return resolver

    return decorate


def register_seeded_family(prefix: str, spec: Callable[[int], "ModelSpec"]) -> None:
    """Register ``<prefix>:<seed>``: the model ``spec(seed)`` builds, for a seed of digits."""

    def seed(argument: str) -> int:
        if not argument.isdigit():
            raise UnknownNameError(f"{prefix} model", f"{prefix}:{argument}", [f"{prefix}:<seed>"])
        return int(argument)

    register_family(prefix, check=seed)(lambda argument: spec(seed(argument)))


def _load_built_ins() -> None:
    """Every public module of this package registers its models when the registry is first
    asked; then the quick zoo is complete, and the quick-int8 zoo is its models quantized."""
    if import_built_ins("models", direct_public_module):
        add_to_zoo("quick-int8", *(name + INT8_SUFFIX for name in list_models(zoo="quick")))


def add_to_zoo(zoo: str, *names: str) -> None:
    """Put derived names (``<name>.unfused``, ``<name>.int8``, ``timm:<name>``) in a zoo."""
    _zoo_variants.setdefault(zoo, set()).update(names)
    if zoo != "full":
        add_to_zoo("full", *names)


def list_models(pattern: str = "*", zoo: str | None = None) -> list[str]:
    """Model names matching a glob pattern: all registered ones (entry points included), or
    the members of a zoo."""
    _load_built_ins()
    if zoo is None:
        names = set(_models) | set(entry_point_names(ENTRY_POINT_GROUP))
    elif zoo in _family_catalogs:
        names = {f"{zoo}:{argument}" for argument in _family_catalogs[zoo]()}
    else:
        names = {n for n, entry in _models.items() if zoo in entry.zoos}
        names |= _zoo_variants.get(zoo, set())
    return sorted(n for n in names if fnmatch.fnmatch(n, pattern))


def list_zoos() -> list[str]:
    _load_built_ins()
    return sorted({zoo for entry in _models.values() for zoo in entry.zoos} | set(_zoo_variants)
                  | set(_family_catalogs))


def _unknown(name: str) -> UnknownNameError:
    families = ", ".join(f"{prefix}:<name>" for prefix in sorted(_families))
    return UnknownNameError("model", name, list_models(), f" (also {families}, <name>{UNFUSED_SUFFIX}, "
                            f"<name>{INT8_SUFFIX}, package.module:factory, file.py:factory, a .pt2 file)")


def _zoo_digest() -> str:
    """Changes whenever a model definition in models/ changes."""
    return files_digest(ZOO_DIR.glob("*.py"))


def _factory_digest(factory) -> str:
    """The digest of the file defining a user's factory (the zoo's, for a lambda in it)."""
    source = inspect.getsourcefile(factory)
    return files_digest([source]) if source else _zoo_digest()


def _in_eval_mode(module: torch.nn.Module) -> torch.nn.Module:
    """``module`` switched to eval mode. An exported graph (torch.export's ``.module()``, a
    ``convert_pt2e`` result) refuses ``.eval()``; torchao switches its dropout and batch norm
    in the graph instead."""
    try:
        module.eval()
    except NotImplementedError:
        from torchao.quantization.pt2e import move_exported_model_to_eval

        move_exported_model_to_eval(module)
    return module


def _from_factory(name: str, factory) -> ModelSpec:
    """A user's factory called: it returns a ModelSpec or ``(module, example_inputs)``, the
    module possibly exported or quantized already, or an ExportedProgram (measured as it is)."""
    made = factory()
    if isinstance(made, ModelSpec):
        return made
    if isinstance(made, tuple) and len(made) == 2:
        inputs = made[1] if isinstance(made[1], tuple) else (made[1],)
        if isinstance(made[0], torch.export.ExportedProgram):
            return ModelSpec(name, made[0].module(), inputs, exported=made[0])
        if isinstance(made[0], torch.nn.Module):
            return ModelSpec(name, _in_eval_mode(made[0]), inputs)
    raise InvalidModelError(f"model factory '{name}' returned {type(made).__name__}; "
                            "return (module, example_inputs) or a models.ModelSpec")


def _saved_program(name: str) -> ModelSpec:
    path = Path(name).expanduser()
    try:
        exported = torch.export.load(path)
    except Exception as error:  # torch.export.load raises many types for a bad file
        raise InvalidModelError(f"{path} is not a program saved with torch.export.save: {error}") from error
    if not exported.example_inputs:
        raise InvalidModelError(f"{path} was saved without example inputs; export it with example inputs")
    return ModelSpec(name, exported.module(), exported.example_inputs[0], exported=exported)


@dataclass(frozen=True)
class _Source:
    """How to build a model, and the digest of what defines it (known without building)."""

    build: Callable[[], ModelSpec]
    digest: Callable[[], str]


def _user_factory(base: str, load: Callable) -> _Source:
    return _Source(lambda: _from_factory(base, load()), lambda: _factory_digest(load()))


def _resolve(base: str) -> _Source:
    """Where the model ``base`` (no variant suffix) comes from."""
    _load_built_ins()
    if base in _models:
        return _Source(_models[base].factory, _zoo_digest)
    if base.endswith(SAVED_PROGRAM_SUFFIX):
        path = Path(base).expanduser()
        if not path.is_file():
            raise UsageError(f"no saved program at {base} (a .pt2 written by torch.export.save)")
        return _Source(lambda: _saved_program(base), lambda: files_digest([path]))
    prefix, separator, argument = base.partition(":")
    if separator and prefix in _families:
        _family_checks.get(prefix, lambda argument: None)(argument)
        return _Source(lambda: _families[prefix](argument), _zoo_digest)
    found = entry_point_names(ENTRY_POINT_GROUP).get(base)
    if found is not None:
        return _user_factory(base, found.load)
    if separator:
        factory = load_object(base, "model", list_models())
        if not callable(factory):
            raise UnknownNameError("model", base, list_models(), f" ({base} is not callable)")
        return _user_factory(base, lambda: factory)
    raise _unknown(base)


def create(name: str) -> ModelSpec:
    """Build the model registered (or resolvable) as ``name``: random weights are drawn from a
    generator seeded for the build, so that every build of a model has the same weights (an
    export cached by one process and a program lowered by another must agree with the eager
    module a third one builds to check a program's outputs)."""
    variants = split_variants(name)
    source = _resolve(variants.base)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(WEIGHT_SEED)
        spec = source.build()
    spec.source_digest = variants.digest(spec.source_digest or source.digest())
    variants.apply(spec)
    spec.name = name
    return spec


def source_digest(name: str) -> str:
    """The digest of what defines ``name`` (the zoo's files, a user factory's file, a saved
    program's bytes; the quantization code for .int8), without building the model."""
    variants = split_variants(name)
    return variants.digest(_resolve(variants.base).digest())


def resolve_models(names: str | None = None, zoo: str | None = None) -> list[str]:
    """Model names from a comma list or a zoo name, validated."""
    if zoo is not None:
        if zoo not in list_zoos():
            raise UnknownNameError("zoo", zoo, list_zoos())
        return list_models(zoo=zoo)
    chosen = []
    for name in (n.strip() for n in (names or "").split(",") if n.strip()):
        chosen += _expand(name) if _GLOB & set(name) else [name]
    if not chosen:
        raise UsageError(f"no model named in {names or ''!r}; name one or more (see `layoutbench list models`)")
    for name in chosen:
        _resolve(split_variants(name).base)  # raises for a name create() could not resolve, building nothing
    return list(dict.fromkeys(chosen))


def _expand(pattern: str) -> list[str]:
    """The names a glob selects: ``<family>:<glob>`` from the family's catalog (trailing
    variant suffixes kept), else from the registered models."""
    _load_built_ins()
    variants = split_variants(pattern)
    prefix, separator, argument = variants.base.partition(":")
    if separator and prefix in _family_catalogs:
        names = [f"{prefix}:{a}" for a in fnmatch.filter(_family_catalogs[prefix](), argument)]
    else:
        names = list_models(variants.base)
    if not names:
        raise UsageError(f"no model matches {pattern!r}; see `layoutbench list models` "
                         f"or `layoutbench list models --zoo {prefix if separator else 'full'}`")
    return sorted(n + variants.suffix for n in names)
