"""Imports of layoutbench's code and of users' code (plug-ins, models) from their source as
it is now, and the bytes each such module was compiled from (:func:`source_bytes`).

A record's identity digests the source of the code that made it (``code_digest`` in
``harness/results/provenance.py``), but Python runs a module from its cached bytecode
(``__pycache__``), which it validates by the source's modification time in whole seconds and
its size: a file saved twice within a second, with the same size, keeps the first save's
bytecode, and every later process would measure the old code under the new code's identity.
Such modules are loaded here by :class:`SourceHashLoader`, which runs cached bytecode only
where it was compiled from the very bytes the file holds (a checked-hash .pyc, PEP 552) and
writes its own so; Python's own loader, meeting one of those later, validates it by hash too.
The bytes compiled are kept, so that a digest is of the code that runs even where the file
changes after the import. Installed code (the standard library, site-packages) is versioned
on its own and loaded as Python loads it.

:func:`install` (run by ``import layoutkit``, the first import of each of our packages) puts
the finder first on ``sys.meta_path``.
"""

import contextlib
import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import marshal
import os
import sys
from pathlib import Path

OWN_PACKAGES = ("layoutkit", "costmodel", "harness", "strategies", "models", "benchmarks", "tests")
INSTALLED = ("site-packages", "dist-packages")
_CHECKED_HASH = 0b11  # a .pyc's flags: validated by its source's hash, checked at every import
_compiled: dict[str, bytes] = {}  # source path -> the bytes its module was compiled from here


def is_user_code(name: str, path: str) -> bool:
    """Whether the module ``name`` (from the file ``path``) is code whose content is a record's
    identity: our packages, and what is neither the standard library nor installed."""
    top = name.partition(".")[0]
    return top in OWN_PACKAGES or (top not in sys.stdlib_module_names
                                   and not any(part in INSTALLED for part in Path(path).parts))


def source_bytes(path) -> bytes:
    """The bytes the module of ``path`` was compiled from in this process, or (not imported
    through :class:`SourceHashLoader`) the file's bytes now."""
    compiled = _compiled.get(str(Path(path)))
    return compiled if compiled is not None else Path(path).read_bytes()


def files_digest(paths) -> str:
    """A digest of the files' bytes (:func:`source_bytes`), in the order of their paths."""
    digest = hashlib.sha256()
    for path in sorted(paths):
        digest.update(source_bytes(path))
    return digest.hexdigest()[:16]


class SourceHashLoader(importlib.machinery.SourceFileLoader):
    """A source file's loader that compiles what the file holds now: cached bytecode is used
    where it is a checked-hash .pyc of these bytes, and written as one otherwise."""

    def get_code(self, fullname):
        path = self.get_filename(fullname)
        source = self.get_data(path)
        _compiled[str(Path(path))] = source
        return self.code_of(path, source)

    def code_of(self, path: str, source: bytes):
        """The code object of ``source``, from ``path``'s cached bytecode where it was compiled
        from these bytes; else compiled, and cached as a checked-hash .pyc."""
        header = importlib.util.MAGIC_NUMBER + _CHECKED_HASH.to_bytes(4, "little") + importlib.util.source_hash(source)
        try:
            cached = importlib.util.cache_from_source(path)
        except NotImplementedError:  # an interpreter without a bytecode cache
            cached = None
        if cached is not None:
            try:
                data = self.get_data(cached)
            except OSError:
                data = b""
            if data[:len(header)] == header:
                with contextlib.suppress(EOFError, ValueError, TypeError):  # a damaged .pyc: compiled again below
                    return marshal.loads(memoryview(data)[len(header):])
        code = self.source_to_code(source, path)
        if cached is not None and not sys.dont_write_bytecode:
            self.set_data(cached, header + marshal.dumps(code))  # written atomically; a read-only tree is skipped
        return code


class _UserCodeFinder(importlib.abc.MetaPathFinder):
    """Finds a module as the finders after it do, and gives user code (:func:`is_user_code`)
    loaded from a source file a :class:`SourceHashLoader`."""

    def find_spec(self, fullname, path=None, target=None):
        later = sys.meta_path[sys.meta_path.index(self) + 1:] if self in sys.meta_path else []
        for finder in later:
            find_spec = getattr(finder, "find_spec", None)
            spec = find_spec(fullname, path, target) if find_spec else None
            if spec is not None:
                if type(spec.loader) is importlib.machinery.SourceFileLoader and is_user_code(fullname, spec.origin):
                    spec.loader = SourceHashLoader(fullname, spec.origin)
                return spec
        return None


def spec_from_file(name: str, path: Path):
    """The spec of a module loaded from the source file ``path`` with a :class:`SourceHashLoader`."""
    location = os.path.abspath(path)
    return importlib.util.spec_from_file_location(name, location, loader=SourceHashLoader(name, location))


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once per process). The user code imported
    before it (``layoutkit`` itself, the package that imported it) has its bytecode cached as
    checked-hash .pyc files, so that from the next import on, by any loader, it too is the
    code the file holds."""
    if any(isinstance(finder, _UserCodeFinder) for finder in sys.meta_path):
        return
    sys.meta_path.insert(0, _UserCodeFinder())
    for name, module in list(sys.modules.items()):
        spec = getattr(module, "__spec__", None)
        if spec is not None and type(spec.loader) is importlib.machinery.SourceFileLoader and \
                spec.origin and is_user_code(name, spec.origin):
            loader = SourceHashLoader(name, spec.origin)
            with contextlib.suppress(OSError, SyntaxError):  # a file removed or broken since: its next import says so
                loader.code_of(spec.origin, loader.get_data(spec.origin))
