"""What came back from another machine, read without trusting it: the tar ``remote_runner.py``
wrote or the directory ``run.sh`` filled (``import-remote``'s ARCHIVE).

Its ``remote.json`` must have the shape those two write (:func:`shape_problem`), and its ETDumps
and outputs are taken only where it promises them: each run's ``processes`` ETDumps and
``outputs`` outputs, at the places :func:`~harness.targets.vulkan.remote.remote_runner.etdump_paths`
and ``output_paths`` name. A tar's members are checked with the standard library's extraction
filter (``tarfile.data_filter``: no absolute path, no ``..``, no link out of the destination)
before anything is extracted, and read whole first, so a truncated archive is refused before it
is used. What is wrong is one :class:`UsageError`.
"""

import contextlib
import json
import lzma
import os
import shutil
import stat
import tarfile
import zlib
from pathlib import Path

from harness.errors import UsageError
from harness.targets.vulkan.remote.remote_runner import MOST_OUTPUTS, REMOTE_SUMMARY

MADE_BY = "the tar remote_runner.py wrote or the directory run.sh filled"
# What reading a damaged tar (cut short, corrupted) raises, by the layer that notices.
DAMAGED = (tarfile.TarError, EOFError, zlib.error, lzma.LZMAError)


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _whole(least: int):
    return lambda value: type(value) is int and value >= least


def _list_of(check, length: int | None = None):
    return lambda value: (isinstance(value, list) and length in (None, len(value))
                          and all(check(item) for item in value))


def _optional(check):
    return lambda value: value is None or check(value)


def _is(kind: type):
    return lambda value: isinstance(value, kind)


# key: (what its value must be, the check, whether it must be there)
SUMMARY_SHAPE = {
    "settings": ("an object", _is(dict), True), "programs": ("an object", _is(dict), True),
    "machine": ("a string", _is(str), True), "runner_digest": ("a string", _is(str), True),
    "device": ("a string or null", _optional(_is(str)), False),
    "limits": ("an object or null", _optional(_is(dict)), False), "unknown": ("an object", _is(dict), False),
}
SETTINGS_SHAPE = {"iterations": ("a whole number >= 1", _whole(1), True),
                  "processes": ("a whole number >= 1", _whole(1), False)}
FAILED_RUN_SHAPE = {"error": ("a string", _is(str), True)}
RUN_SHAPE = {
    "etdump": ("true or false", _is(bool), True), "processes": ("a whole number >= 1", _whole(1), False),
    "latencies_ms": ("a list of numbers or null", _optional(_list_of(_number)), False),
    "walls_ns": ("a list of [1, N + 1] wall-clock pairs", _list_of(_list_of(_number, 2)), False),
    "clocks_ns": ("a list of [start, end, start, end] clock readings", _list_of(_list_of(_number, 4)), False),
    "peak_rss_bytes": ("a number or null", _optional(_number), False),
    "rss_kib": ("a list of numbers or null", _optional(_list_of(_number)), False),
    "outputs": (f"a whole number from 0 to {MOST_OUTPUTS} or null",
                _optional(lambda value: _whole(0)(value) and value <= MOST_OUTPUTS), False),
}


def _shown(value) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 40 else text[:37] + "..."


def _problem(value, what: str, shape: dict) -> str | None:
    """What in ``value`` (``what`` names it) does not fit ``shape``, or None."""
    if not isinstance(value, dict):
        return f"{what} is {_shown(value)}, not an object"
    for key, (expected, check, required) in shape.items():
        if key in value and not check(value[key]):
            return f"{what}'s {key} is {_shown(value[key])}, not {expected}"
        if required and key not in value:
            return f"{what} has no {key}"
    return None


def _run_problem(name: str, run, settings: dict) -> str | None:
    if isinstance(run, dict) and "error" in run:
        return _problem(run, name, FAILED_RUN_SHAPE)
    problem = _problem(run, name, RUN_SHAPE)
    if problem:
        return problem
    if run.get("processes", 1) > settings.get("processes", 1):
        return f"{name} ran in {run['processes']} processes, more than its settings' {settings.get('processes', 1)}"
    if not (run["etdump"] or run.get("latencies_ms") or run.get("walls_ns") or run.get("clocks_ns")):
        return f"{name} holds no timing: no ETDump, no latencies, no wall clocks"
    return None


def shape_problem(summary) -> str | None:
    """What in a ``remote.json`` read is not of the shape remote_runner.py and run.sh write, or
    None (its figures are judged per record: a run's impossible figure fails that record alone)."""
    return (_problem(summary, REMOTE_SUMMARY, SUMMARY_SHAPE)
            or _problem(summary["settings"], "its settings", SETTINGS_SHAPE)
            or next(filter(None, (_run_problem(f"its run of {name}", run, summary["settings"])
                                  for name, run in summary["programs"].items())), None))


def _summary(read, archive: Path) -> dict:
    """``remote.json`` (``read()`` opens it), or a one-line error saying what ``archive`` lacks or
    what in it is not as remote_runner.py or run.sh write it."""
    try:
        with read() as member:
            summary = json.load(member)
    except (KeyError, ValueError, TypeError, AttributeError, OSError, *DAMAGED):
        raise UsageError(f"{archive} holds no {REMOTE_SUMMARY} that remote_runner.py or run.sh wrote: pass "
                         f"{MADE_BY}, whole") from None
    problem = shape_problem(summary)
    if problem:
        raise UsageError(f"{archive} is not as remote_runner.py or run.sh write it: {problem}; pass {MADE_BY}, whole")
    return summary


def _lacking(archive: Path, missing: list[str], wanted: list[str]) -> UsageError:
    return UsageError(f"{archive} lacks {missing[0]} ({len(missing)} of the {len(wanted)} files its "
                      f"{REMOTE_SUMMARY} promises are missing): pass {MADE_BY}, whole")


class _Directory:
    """The directory run.sh filled, of which only plain files are read: a link (run.sh writes none)
    could name any file of this machine, and a copy is never readable by more than its source."""

    def __init__(self, root: Path):
        self.root = root
        # where remote.json is missing, opening the path run.sh writes it at says so
        self.summary = _summary(lambda: open(self._plain(REMOTE_SUMMARY) or root / REMOTE_SUMMARY, "rb"), root)

    def _plain(self, name: str) -> Path | None:
        """``name`` under the directory, None where it is missing; a one-line error where it is, or
        lies behind, a link, or is not a plain file."""
        path = self.root / name
        if os.path.realpath(path) != os.path.join(os.path.realpath(self.root), name):
            raise UsageError(f"{path} is, or lies behind, a link, and import-remote reads none: pass the "
                             "directory run.sh filled, as it filled it")
        if path.exists() and not path.is_file():
            raise UsageError(f"{path} is not a plain file: pass the directory run.sh filled, as it filled it")
        return path if path.exists() else None

    def put(self, names: list[str], out: Path) -> None:
        sources = [self._plain(name) for name in names]
        if None in sources:
            raise _lacking(self.root, [name for name, source in zip(names, sources) if source is None], names)
        for name, source in zip(names, sources):
            (out / name).parent.mkdir(parents=True, exist_ok=True)
            with open(source, "rb", opener=lambda path, flags: os.open(path, flags | os.O_NOFOLLOW)) as data:
                # its permissions less the umask's: the copy is never readable by more than its source
                mode = stat.S_IMODE(os.fstat(data.fileno()).st_mode) & 0o666
                with open(os.open(out / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode), "wb") as copy:
                    shutil.copyfileobj(data, copy)


class _Tar:
    """The tar remote_runner.py wrote, its members read whole and checked before any is used."""

    def __init__(self, tar: tarfile.TarFile, path: Path, out: Path):
        self.tar, self.path = tar, path
        with self._reading():
            self.members = {member.name: member for member in tar.getmembers()}
            for member in self.members.values():
                tarfile.data_filter(member, str(out.absolute()))
            self.summary = _summary(lambda: tar.extractfile(REMOTE_SUMMARY), path)

    @contextlib.contextmanager
    def _reading(self):
        try:
            yield
        except tarfile.FilterError as error:
            raise UsageError(f"{self.path} holds what import-remote does not extract: {error}; "
                             f"pass {MADE_BY}") from None
        except DAMAGED as error:
            raise UsageError(f"{self.path} is damaged ({type(error).__name__}: {error}): pass {MADE_BY}, "
                             "whole") from None
        except OSError as error:
            raise UsageError(f"cannot read {self.path}: {error.strerror or error}") from None

    def put(self, names: list[str], out: Path) -> None:
        missing = [name for name in names if name not in self.members or not self.members[name].isfile()]
        if missing:
            raise _lacking(self.path, missing, names)
        with self._reading():
            self.tar.extractall(out, members=[self.members[name] for name in names], filter="data")


@contextlib.contextmanager
def returned(archive: Path, out: Path):
    """What came back at ``archive`` (a tar or run.sh's directory), to be imported into ``out``:
    its ``summary`` (remote.json) and ``put(names, directory)``, which places the files named
    (ETDumps, outputs: paths relative to it) in ``directory``, or raises where ``archive`` lacks one."""
    if archive.is_dir():
        yield _Directory(archive)
        return
    try:
        tar = tarfile.open(archive)
    except FileNotFoundError:
        raise UsageError(f"archive {archive} does not exist: pass {MADE_BY}") from None
    except DAMAGED:
        raise UsageError(f"{archive} is not a tar archive: pass {MADE_BY}") from None
    except OSError as error:
        raise UsageError(f"cannot read archive {archive}: {error.strerror}") from None
    with tar:
        yield _Tar(tar, archive, out)
