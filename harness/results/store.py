"""Result records: one JSON object per (model, strategy, target), appended as produced.

A sweep writes each record the moment it exists, so an interrupted sweep keeps what it
finished, and a re-run into the same directory reuses every record ``ok`` with the same
identity (``harness.pipeline.sweep`` says what that is). ``load`` gives
a pandas DataFrame (records of earlier schema versions upgraded); ``to_long`` the tidy
form (one row per metric). Targets without a pluggable layout pass (Arm) record the
strategy as null; frames show it as :data:`NO_STRATEGY`.
"""

import json
from pathlib import Path

import pandas as pd

from harness.results.schema import IDENTITY_KEYS, SCHEMA_VERSION, STATUSES, metric_columns, upgrade

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


def frame(records: list[dict]) -> pd.DataFrame:
    """Records as a DataFrame, the null strategy of backend-only targets shown as ``-``."""
    table = pd.DataFrame(records)
    if "strategy" in table:
        table["strategy"] = table["strategy"].fillna(NO_STRATEGY)
    return table


def load(directory: str | Path) -> pd.DataFrame:
    """The latest record of each (model, strategy, target) in a results directory."""
    return frame(latest(RecordStore(directory).read()))


def with_excess(table: pd.DataFrame) -> pd.DataFrame:
    """Add ``excess_transitions``: transitions over the ILP optimum of the same model and
    target (null where the model has no ok ILP record)."""
    if "transitions" not in table.columns:
        return table.assign(excess_transitions=None)
    optimum = table[(table["strategy"] == OPTIMUM_STRATEGY) & (table["status"] == "ok")]
    optimum = optimum.set_index(["model", "target"])["transitions"].rename("optimum_transitions")
    joined = table.join(optimum, on=["model", "target"])
    table = table.copy()
    table["excess_transitions"] = joined["transitions"] - joined["optimum_transitions"]
    return table


def to_long(table: pd.DataFrame) -> pd.DataFrame:
    """Tidy form: one row per model x strategy x target x metric."""
    metrics = metric_columns(table.columns)
    keep = [c for c in table.columns if c not in metrics]
    return table.melt(id_vars=keep, value_vars=metrics, var_name="metric").dropna(subset=["value"])
