"""Result records: one JSON object per (model, strategy, target), appended as produced.

A sweep writes each record the moment it exists, so an interrupted sweep keeps what it finished, and a
re-run into the same directory reuses every ``ok`` record of the same identity (``harness.sweep.planning``).
``read`` upgrades records of earlier schema versions; :mod:`harness.results.frames` makes pandas tables of
them. Targets without a pluggable layout pass (Arm) record the strategy as null.

One process writes a results directory at a time (:meth:`RecordStore.writing`, held for a whole sweep), so
no record is ever a duplicate: a sweep's lines are one unbroken run holding each (model, strategy, target)
of its plan at most once (measured, reused where the file lacks it, or skipped unless the file's latest
record is that same skip); a second sweep starts when the first ends and reuses what it measured (with
``--fresh``, measures it again).
"""

import contextlib
import json
import os
import shlex
import socket
import sys
from datetime import datetime, timezone
from pathlib import Path

from harness.results.results_dir import ResultsDir, remove_if_empty
from harness.results.schema import IDENTITY_KEYS, SCHEMA_VERSION, STATUSES, bad_values, upgrade, well_formed
from layoutkit import strict_json
from layoutkit.errors import UsageError, write_error
from layoutkit.files import file_lock


def make_record(model: str, strategy: str | None, target: str, status: str, reason=None, **fields) -> dict:
    if status not in STATUSES:
        raise ValueError(f"status must be one of {STATUSES}, not {status!r}")
    return {"model": model, "strategy": strategy, "target": target, "status": status, "reason": reason,
            "schema_version": SCHEMA_VERSION, **fields}


def key(record: dict) -> tuple:
    """(model, strategy, target) of a record."""
    return tuple(record.get(k) for k in IDENTITY_KEYS)


class MalformedRecordError(UsageError):
    """Records no table, report or gate can use (a metric that is not a number, a schema version
    newer than this code): one line each."""


class ResultsBusyError(UsageError):
    """Another process writes the results directory, and the caller would not wait."""


def _this_process() -> dict:
    return {"pid": os.getpid(), "host": socket.gethostname(), "command": shlex.join(sys.argv),
            "since": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")}


def _holder(text: str) -> str:
    """The writer a lock file names, in words."""
    try:
        holder = json.loads(text)
        return f"pid {holder['pid']} on {holder['host']} ({holder['command']}) since {holder['since']}"
    except (ValueError, TypeError, KeyError):  # between its holder's lock and its write
        return "another process"


def _record(line: str) -> dict | None:
    """The record a line holds (in the current schema), or None where it holds none (or one
    no reader could use: see :func:`~harness.results.schema.well_formed`)."""
    try:
        record = json.loads(line)
    except ValueError:
        return None
    if not isinstance(record, dict) or not {*IDENTITY_KEYS, "status"} <= record.keys() or not well_formed(record):
        return None
    return upgrade(record)


class RecordStore:
    """The JSON Lines file of one results directory."""

    def __init__(self, directory: str | Path):
        self.layout = ResultsDir(directory)
        self.directory = self.layout.root
        self.path = self.layout.records
        self._reported: list[int] = []  # the lines already named as not records

    def read(self) -> list[dict]:
        """The records, in the order written. A line that holds no record (cut short by a kill, written
        by hand or by another tool, a field no reader could use) is skipped and named on stderr; records
        with values no reader can use (:func:`~harness.results.schema.bad_values`) raise
        :class:`MalformedRecordError`, naming every such line."""
        if not self.path.exists():
            return []
        records, skipped, malformed = [], [], []
        with self.path.open() as lines:
            for number, line in enumerate(lines, 1):
                if not line.strip():
                    continue
                record = _record(line)
                if record is None:
                    skipped.append(number)
                    continue
                malformed += [f"{self.path}:{number}: {problem}; correct or delete that line"
                              for problem in bad_values(record)]
                records.append(record)
        if skipped and skipped != self._reported:  # once per reader, not at each of a sweep's reads
            self._reported = skipped
            lines = f"{len(skipped)} lines are not records" if len(skipped) > 1 else "1 line is not a record"
            numbers = ", ".join(map(str, skipped[:10])) + (", ..." if len(skipped) > 10 else "")
            print(f"layoutbench: {self.path}: {lines} (line{'s' * (len(skipped) > 1)} {numbers}); skipped",
                  file=sys.stderr)
        if malformed:
            raise MalformedRecordError("\n".join(malformed))
        return records

    def latest(self, **wanted: str) -> list[dict]:
        """The last record written for each (model, strategy, target); with ``wanted`` fields
        (``target="vulkan-run", status="ok"``), only those of these values."""
        last = {key(r): r for r in self.read()}.values()
        return [r for r in last if all(r[field] == value for field, value in wanted.items())]

    @contextlib.contextmanager
    def writing(self, wait: bool = True):
        """Held while this process writes the directory (created where missing). Another
        process holding it: wait for it, saying so on stderr, or with ``wait=False`` raise
        :class:`ResultsBusyError`; a holder that was killed is taken over, said in one line."""
        lock = self.layout.writer_lock  # holds the writer's pid, host, command and start while it writes
        with contextlib.ExitStack() as stack:
            try:
                handle = stack.enter_context(file_lock(lock, wait=False))
            except BlockingIOError:
                holder = _holder(lock.read_text())
                if not wait:
                    raise ResultsBusyError(f"{self.directory} is being written by {holder}; wait for it "
                                           "(without --no-wait), or use another --out") from None
                print(f"layoutbench: {self.directory} is being written by {holder}; waiting for it to finish",
                      file=sys.stderr, flush=True)
                handle = stack.enter_context(file_lock(lock))
            except OSError as error:
                why = "it is a file" if self.directory.is_file() else error.strerror
                raise UsageError(f"cannot write results into {self.directory}: {why}; "
                                 "name a directory with --out") from None
            handle.seek(0)
            left = handle.read()
            if left.strip():  # a holder lets go with an empty file; this one was killed
                print(f"layoutbench: taking over {self.directory} from {_holder(left)}, which ended without "
                      "letting go of it", file=sys.stderr)
            handle.truncate(0)
            handle.write(json.dumps(_this_process()))
            handle.flush()
            # Workers' crash logs left empty by a sweep killed before it could remove them: no other sweep
            # writes here now, so no worker of one still writes them.
            for crash_log in self.layout.worker_crash_logs():
                remove_if_empty(crash_log)
            try:
                yield
            finally:
                handle.truncate(0)

    def append(self, record: dict) -> dict:
        """Write ``record`` as the file's last line, in strict JSON, and give it back as a later read would (lists
        for tuples, null for NaN and infinities, strings for what else JSON cannot hold). A write that fails (a full
        disk) leaves the file as it was and raises a one-line error: never half a line."""
        line = strict_json.dumps(record, default=str).encode() + b"\n"
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            with self.path.open("a+b", buffering=0) as out:
                end = out.seek(0, os.SEEK_END)
                if end:
                    out.seek(end - 1)
                    if out.read(1) != b"\n":  # a line cut short by a kill must not swallow this record
                        line = b"\n" + line
                try:
                    written = 0
                    while written < len(line):
                        written += out.write(line[written:])
                except OSError:
                    out.truncate(end)
                    raise
        except OSError as error:
            raise write_error(f"a record to {self.path}", error, "--out") from None
        return json.loads(line)
