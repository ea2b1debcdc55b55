"""Records as pandas tables: the latest record of each (model, strategy, target) as a DataFrame, with the
metrics derived from others (the excess over the ILP optimum, the measured GPU time a prediction is compared
with), or in tidy (long) form. Apart from :mod:`harness.results.store` so that writing and reading records
(the sweep, every worker) never imports pandas.
"""

from pathlib import Path

import pandas as pd

from harness.results.schema import metric_columns
from harness.results.store import RecordStore
from layoutkit.reference_strategies import OPTIMUM_STRATEGY

NO_STRATEGY = "-"  # how tables show the null strategy of targets without a layout pass (Arm)


def frame(records: list[dict]) -> pd.DataFrame:
    """Records as a DataFrame, the null strategy of backend-only targets shown as :data:`NO_STRATEGY`."""
    table = pd.DataFrame(records)
    if "strategy" in table:
        table["strategy"] = table["strategy"].fillna(NO_STRATEGY)
    return table


def load(directory: str | Path) -> pd.DataFrame:
    """The latest record of each (model, strategy, target) in a results directory."""
    return frame(RecordStore(directory).latest())


def with_derived(table: pd.DataFrame) -> pd.DataFrame:
    """Add ``excess_transitions``: transitions over the ILP optimum of the same model and target (null where the
    model has no ok ILP record); and where a run timed the dispatches, ``measured_gpu_ms``: their GPU time less
    ET-VK's staging copies, what ``predicted_gpu_ms`` predicts."""
    if "transitions" not in table.columns:
        table = table.assign(excess_transitions=None)
    else:
        optimum = table[(table["strategy"] == OPTIMUM_STRATEGY) & (table["status"] == "ok")]
        optimum = optimum.set_index(["model", "target"])["transitions"].rename("optimum_transitions")
        joined = table.join(optimum, on=["model", "target"])
        table = table.assign(excess_transitions=joined["transitions"] - joined["optimum_transitions"])
    if {"gpu_dispatch_ms", "staging_gpu_ms"} <= set(table.columns):
        table = table.assign(measured_gpu_ms=table["gpu_dispatch_ms"] - table["staging_gpu_ms"])
    return table


def to_long(table: pd.DataFrame) -> pd.DataFrame:
    """Tidy form: one row per model x strategy x target x metric."""
    metrics = metric_columns(table.columns)
    keep = [c for c in table.columns if c not in metrics]
    return table.melt(id_vars=keep, value_vars=metrics, var_name="metric").dropna(subset=["value"])
