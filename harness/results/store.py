"""Result records: one JSON object per (model, strategy, target), appended as produced.

A sweep writes each record the moment it exists, so an interrupted sweep keeps what it
finished, and a re-run into the same directory reuses every record ``ok`` with the same
identity (``harness.pipeline.sweep`` says what that is). ``read`` upgrades records of
earlier schema versions; :mod:`harness.results.frames` makes pandas tables of them.
Targets without a pluggable layout pass (Arm) record the strategy as null; tables show it
as :data:`NO_STRATEGY`.
"""

import json
from pathlib import Path

from harness.results.schema import IDENTITY_KEYS, SCHEMA_VERSION, STATUSES, upgrade

RECORDS_FILE = "records.jsonl"
NO_STRATEGY = "-"
OPTIMUM_STRATEGY = "ilp"


def make_record(model: str, strategy: str | None, target: str, status: str, reason=None, **fields) -> dict:
    if status not in STATUSES:
        raise ValueError(f"status must be one of {STATUSES}, not {status!r}")
    record = {"model": model, "strategy": strategy, "target": target, "status": status, "reason": reason,
              "schema_version": SCHEMA_VERSION}
    record.update(fields)
    return record


def key(record: dict) -> tuple:
    """(model, strategy, target) of a record."""
    return tuple(record.get(k) for k in IDENTITY_KEYS)


class RecordStore:
    """The JSON Lines file of one results directory."""

    def __init__(self, directory: str | Path):
        self.directory = Path(directory)
        self.path = self.directory / RECORDS_FILE

    def read(self) -> list[dict]:
        if not self.path.exists():
            return []
        records = []
        with self.path.open() as lines:
            for line in lines:
                line = line.strip()
                if line:
                    try:
                        records.append(upgrade(json.loads(line)))
                    except json.JSONDecodeError:
                        continue  # a line cut short by an interruption
        return records

    def append(self, record: dict) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        with self.path.open("a+b") as out:
            # A line cut short by a kill must not swallow the record written after it.
            if out.tell() > 0:
                out.seek(-1, 2)
                if out.read(1) != b"\n":
                    out.write(b"\n")
            out.write(json.dumps(record, default=str).encode() + b"\n")
            out.flush()


def latest(records: list[dict]) -> list[dict]:
    """The last record written for each (model, strategy, target)."""
    return list({key(r): r for r in records}.values())
