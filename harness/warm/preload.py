"""What the warm server imports (see :mod:`harness.warm`): the modules a scout finds, and
the files they came from, checked before every command."""

import gc
import importlib
import os
import pkgutil
import sys
import tempfile
import traceback
from pathlib import Path

OWN_PACKAGES = ("harness", "strategies", "costmodel", "models", "layoutkit")


class ImportedFiles:
    """The files of the modules this process imported, and whether one changed since."""

    def __init__(self):
        self._seen: dict[str, tuple[int, int]] = {}

    def note(self) -> None:
        """Note the files of the modules imported so far, and the shared libraries mapped
        (libtorch and the like are loaded by extension modules, not imported)."""
        paths = [getattr(module, "__file__", None) for module in list(sys.modules.values())]
        with open("/proc/self/maps") as maps:
            paths += [line.split(maxsplit=5)[-1].strip() for line in maps if ".so" in line]
        for path in paths:
            if path and path not in self._seen and os.path.isabs(path) and os.path.isfile(path):
                stat = os.stat(path)  # (a module made at run time may name a file that is not there)
                self._seen[path] = (stat.st_mtime_ns, stat.st_size)

    def changed(self) -> str | None:
        """A file that is not as it was imported (edited, replaced or removed), or None."""
        for path, seen in self._seen.items():
            try:
                stat = os.stat(path)
            except OSError:
                return path
            if (stat.st_mtime_ns, stat.st_size) != seen:
                return path
        return None

    def __len__(self) -> int:
        return len(self._seen)


def _import_all(package_name: str) -> None:
    """Import ``package_name`` and every module under it, passing over any that fails."""
    try:
        package = importlib.import_module(package_name)
    except Exception:
        return
    for info in pkgutil.walk_packages(package.__path__, package_name + ".", onerror=lambda name: None):
        try:
            importlib.import_module(info.name)
        except Exception:
            traceback.print_exc()


def ours(name: str) -> bool:
    """Whether a module is one of layoutbench's."""
    return name.split(".")[0] in OWN_PACKAGES


def scout() -> list[str]:
    """The modules, outside layoutbench's packages, that importing all of those imports, in
    import order; found in a forked child, so this process imports none of layoutbench."""
    with tempfile.NamedTemporaryFile("r", suffix=".modules") as found:
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                for package in OWN_PACKAGES:
                    _import_all(package)
                names = [n for n, m in sys.modules.items()
                         if not ours(n) and n not in ("__main__", "__mp_main__") and getattr(m, "__file__", None)]
                Path(found.name).write_text("\n".join(names))
                code = 0
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise RuntimeError("the scout could not list the modules to import (its traceback is above)")
        return found.read().split()


def preload(names: list[str]) -> ImportedFiles:
    """Import ``names`` here (any that fails is passed over) and note their files."""
    for name in names:
        try:
            importlib.import_module(name)
        except Exception:
            print(f"warm server: not preloaded: {name}", file=sys.stderr)
    gc.collect()
    gc.freeze()  # what every command shares is never garbage: no collection traverses it
    files = ImportedFiles()
    files.note()
    return files
