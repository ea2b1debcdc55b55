"""Writes that fail as a full disk or a read-only directory makes them fail, for the files
under one directory: no test machine has a tiny disk to fill, and root writes into any
directory whatever its mode."""

import errno
import os
from pathlib import Path


class _FillsUp:
    """A file whose disk fills up halfway through the next write: half of it lands, then ENOSPC."""

    def __init__(self, handle):
        self._handle = handle

    def write(self, data):
        self._handle.write(data[: len(data) // 2])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def __getattr__(self, name):
        return getattr(self._handle, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._handle.close()


def fail_writes(monkeypatch, directory: Path, error: int, after: int = 0) -> None:
    """Every file opened for writing under ``directory``, past the first ``after``, fails:
    ``ENOSPC`` once half of a write has landed, any other ``error`` as it is opened."""
    real_open = Path.open
    opened = []

    def open_failing(path, mode="r", *args, **kwargs):
        writing = any(flag in mode for flag in "wax+")
        if not writing or directory.resolve() not in Path(path).resolve().parents:
            return real_open(path, mode, *args, **kwargs)
        opened.append(path)
        if len(opened) <= after:
            return real_open(path, mode, *args, **kwargs)
        if error != errno.ENOSPC:
            raise OSError(error, os.strerror(error), str(path))
        return _FillsUp(real_open(path, mode, *args, **kwargs))

    monkeypatch.setattr(Path, "open", open_failing)
