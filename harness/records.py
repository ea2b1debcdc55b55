"""Result records: one JSON object per (model, strategy, target), appended as produced.

A sweep writes each record the moment it exists, so an interrupted sweep keeps what it
finished, and a re-run into the same directory skips every (model, strategy, target)
already recorded ``ok`` by the same harness commit and library versions. ``load`` gives
a pandas DataFrame; ``to_long`` the tidy form (one row per metric).
"""

import json
from pathlib import Path

import pandas as pd

RECORDS_FILE = "records.jsonl"
IDENTITY_KEYS = ("model", "strategy", "target")
VERSION_KEYS = ("layoutbench_commit", "torch_version", "executorch_version")
METRIC_KEYS = (
    "transitions",
    "transition_bytes",
    "delegate_memory_bytes",
    "transition_memory_bytes",
    "partitions",
    "delegate_ops",
    "ops_outside_delegate",
    "pass_seconds",
    "finish_seconds",
    "prefix_seconds",
    "export_seconds",
    "pte_bytes",
    "latency_ms_median",
    "latency_ms_min",
    "latency_ms_max",
    "peak_rss_bytes",
    "max_abs_error",
    "transition_time_share",
    # Arm targets (harness/arm.py)
    "lowering_seconds",
    "tosa_ops",
    "transposes",
    "transpose_bytes",
    "reference_max_abs_error",
    "reference_seconds",
    "cycles",
    "inferences_per_second",
    "sram_bytes",
    "offchip_bytes",
    "transpose_cycle_share",
    "setup_seconds",
    "inference_seconds",
)
# Metrics where more is better; every other metric is lower-is-better.
HIGHER_IS_BETTER = frozenset({"inferences_per_second"})
COLUMNS = (*IDENTITY_KEYS, "status", "reason", *METRIC_KEYS, "optimal")
STATUSES = ("ok", "skipped", "failed")


def make_record(model: str, strategy: str, target: str, status: str, reason=None, **fields) -> dict:
    if status not in STATUSES:
        raise ValueError(f"status must be one of {STATUSES}, not {status!r}")
    record = {key: None for key in COLUMNS}
    record.update(model=model, strategy=strategy, target=target, status=status, reason=reason)
    record.update(fields)
    return record


def identity(record: dict) -> tuple:
    """What makes two records measure the same thing: names, target and versions."""
    return tuple(record.get(k) for k in (*IDENTITY_KEYS, *VERSION_KEYS))


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
                        records.append(json.loads(line))
                    except json.JSONDecodeError:
                        continue  # a line cut short by an interruption
        return records

    def completed(self) -> set[tuple]:
        """Identities of the records already ``ok``."""
        return {identity(r) for r in self.read() if r.get("status") == "ok"}

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
    by_identity = {tuple(r.get(k) for k in IDENTITY_KEYS): r for r in records}
    return list(by_identity.values())


def load(directory: str | Path) -> pd.DataFrame:
    """The latest record of each (model, strategy, target) in a results directory."""
    return pd.DataFrame(latest(RecordStore(directory).read()))


OPTIMUM_STRATEGY = "ilp"


def with_excess(frame: pd.DataFrame) -> pd.DataFrame:
    """Add ``excess_transitions``: transitions over the ILP optimum of the same model and
    target (null where the model has no ok ILP record)."""
    if "transitions" not in frame.columns:
        return frame.assign(excess_transitions=None)
    optimum = frame[(frame["strategy"] == OPTIMUM_STRATEGY) & (frame["status"] == "ok")]
    optimum = optimum.set_index(["model", "target"])["transitions"].rename("optimum_transitions")
    joined = frame.join(optimum, on=["model", "target"])
    frame = frame.copy()
    frame["excess_transitions"] = joined["transitions"] - joined["optimum_transitions"]
    return frame


def format_number(value: float) -> str:
    """Counts and bytes as whole numbers with separators (pandas makes a column float once
    it has a gap), other values to 4 significant digits."""
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:.4g}"


def to_long(frame: pd.DataFrame) -> pd.DataFrame:
    """Tidy form: one row per model x strategy x target x metric."""
    metrics = [m for m in METRIC_KEYS if m in frame.columns]
    keep = [c for c in frame.columns if c not in metrics]
    return frame.melt(id_vars=keep, value_vars=metrics, var_name="metric").dropna(subset=["value"])
