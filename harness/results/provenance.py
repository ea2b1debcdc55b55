"""Versions, machine facts and code digests: what a record's identity is made of, and the
identity itself (:func:`identity_fields`)."""

import functools
import hashlib
import json
import platform
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from types import ModuleType

from layoutkit.source_loader import is_user_code, source_bytes

REPO_ROOT = Path(__file__).resolve().parents[2]


def _package_version(name: str) -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:
        return None


@functools.cache
def harness_commit() -> str:
    """The layoutbench git commit, with ``+dirty`` when the tree has uncommitted changes."""
    def git(*arguments: str) -> str:
        return subprocess.run(["git", *arguments], cwd=REPO_ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()

    try:
        commit, dirty = git("rev-parse", "--short=12", "HEAD"), git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.CalledProcessError):
        return f"v{_package_version('layoutbench') or 'unknown'}"
    return f"{commit}+dirty" if dirty else commit


@functools.cache
def provenance() -> dict:
    return {
        **{f"{name}_version": _package_version(name) for name in ("torch", "executorch", "timm")},
        "layoutbench_commit": harness_commit(),
        "machine": platform.node(),
        "cpu": platform.processor() or platform.machine(),
        "python_version": platform.python_version(),
    }


def _source(module: ModuleType) -> Path | None:
    """A module's source file; None for built-in, frozen and namespace-like modules."""
    path = getattr(module, "__file__", None)
    return Path(path) if path and Path(path).is_absolute() and Path(path).is_file() else None


def _is_ours(module: ModuleType) -> bool:
    """Code whose content is the identity: our packages, and user code that is not an installed distribution (a
    plug-in's module or file); installed code's version is in the identity instead."""
    path = _source(module)
    return path is not None and is_user_code(module.__name__, str(path))


def _referenced_modules(module: ModuleType):
    """Modules whose objects ``module`` holds in its globals (imported names and modules);
    a package's own submodules are not followed unless imported by name."""
    package = getattr(module, "__path__", None) is not None
    for value in vars(module).values():
        if isinstance(value, ModuleType):
            if not (package and value.__name__.startswith(module.__name__ + ".")):
                yield value
            continue
        owner = getattr(value, "__module__", None)
        if isinstance(owner, str) and owner in sys.modules:
            yield sys.modules[owner]


def code_files(*roots) -> dict[str, Path]:
    """The source files of ``roots`` (classes, modules) and of every module of ours they reach through their
    imports, by module name: a class's own module, its base classes' modules (the installed ExecuTorch ones
    excepted: its version stands for them) and the helpers those import. An entry-point plug-in's own module counts
    even where it is installed."""
    pending = []
    for root in roots:
        if isinstance(root, ModuleType):
            pending.append(root)
            continue
        modules = [sys.modules[c.__module__] for c in root.__mro__ if c.__module__ in sys.modules]
        pending += modules[:1] + [m for m in modules[1:] if _is_ours(m)]  # its own module always counts
    seen: dict[str, Path] = {}
    while pending:
        module = pending.pop()
        if module.__name__ in seen or _source(module) is None:
            continue
        seen[module.__name__] = _source(module)
        pending += [m for m in _referenced_modules(module) if m.__name__ not in seen and _is_ours(m)]
    return seen


def code_digest(*roots) -> str:
    """A digest of :func:`code_files` of ``roots`` as this process compiled them: changes when
    any of that code does."""
    seen = code_files(*roots)
    digest = hashlib.sha256()
    for name in sorted(seen):
        digest.update(name.encode() + b"\0" + source_bytes(seen[name]) + b"\0")
    return digest.hexdigest()[:16]


def identity_fields(model: str, model_digest: str, strategy: str | None, strategy_digest: str | None, target: str,
                    environment: dict, harness_digest: str) -> dict:
    """Everything a record's numbers depend on, and its digest (the record's ``identity``)."""
    fields = {"model_digest": model_digest, "strategy_digest": strategy_digest, "harness_digest": harness_digest,
              "environment": environment}
    identity = json.dumps([model, strategy, target, fields], sort_keys=True, default=str).encode()
    return {**fields, "identity": hashlib.sha256(identity).hexdigest()[:24]}


def tool_versions(distributions) -> dict:
    """The installed version of each distribution (None where it is not installed)."""
    return {name: _package_version(name) for name in distributions}


def file_digest(path) -> str:
    """A digest of a binary (a runtime), for identities."""
    with open(path, "rb") as binary:
        return hashlib.file_digest(binary, "sha256").hexdigest()[:16]
