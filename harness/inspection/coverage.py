"""Whether a table's intervals hold as often as they say they do.

A record under a table that knows its support and intervals states an interval of its
predicted time at a named level (``predicted_gpu_ms_low``, ``predicted_gpu_ms_high``,
:mod:`costmodel.intervals`). :func:`stated_intervals` states them of measured programs, their
nodes priced by the table that predicts them, as a record's would be. Leaving one model out
(:func:`harness.inspection.validation.leave_one_model_out`), each program's measured time is set
against the interval its held-out table states of it: :func:`interval_line` says how often it
lies inside, against the level the intervals name.
"""

import pandas as pd

from costmodel.prediction import Prediction
from costmodel.table import CostTable


def stated_intervals(nodes: pd.DataFrame, queries: list, prices: list, table: CostTable, program: list[str]) -> pd.DataFrame:
    """Per program of ``nodes`` (rows grouped by the columns ``program``, a query and a price
    each), the interval ``table`` states of it (NaN where it states none) and the share of its
    predicted time outside the table's support."""
    rows = {}
    for key, members in nodes.groupby(program).indices.items():
        prediction = Prediction.of([queries[i] for i in members], [prices[i] for i in members], table.support)
        low, high = prediction.interval(table.intervals) if table.intervals else (float("nan"),) * 2
        rows[key] = {"predicted_low_ms": low, "predicted_high_ms": high,
                     "outside_share": prediction.outside_ms / prediction.ms if prediction.ms else 0.0}
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis(program)


def within_interval(programs: pd.DataFrame) -> pd.Series:
    """Per program, whether its measured time lies within the interval stated of it."""
    return programs["measured_ms"].between(programs["predicted_low_ms"], programs["predicted_high_ms"])


def interval_line(programs: pd.DataFrame, level: float | None) -> str:
    """How often programs' measured times (their median process) lie within the interval their
    held-out tables state, against the level it names."""
    stated = programs.dropna(subset=["predicted_low_ms", "predicted_high_ms"])
    if stated.empty or level is None:
        return "the held-out tables state no interval (tables fitted before intervals were)"
    within = within_interval(stated)
    return (f"measured time within the held-out table's interval for {int(within.sum())} of {len(within)} programs "
            f"({within.mean():.0%}); the intervals claim {level:.0%}")
