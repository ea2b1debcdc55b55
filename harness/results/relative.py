"""Each strategy against the baseline strategy (ExecuTorch's own pass), model by model: a metric's relative
change, and per strategy on how many models it is lower, equal or higher, and by how much.

A change is ``(strategy - baseline) / baseline`` of the same model and target; where the baseline is 0 it is
0 if the strategy's value is too, else infinite (``from 0``), so no model drops out of a count.
"""

import pandas as pd

from layoutkit.reference_strategies import BASELINE_STRATEGY

# Changes smaller than this count as equal: a table shows them as +0 %.
EQUAL = 5e-4


def values(records: pd.DataFrame, metric: str) -> pd.DataFrame:
    """The ok records' values of ``metric``, model x strategy."""
    ok = records[records["status"] == "ok"]
    return ok.pivot_table(index="model", columns="strategy", values=metric, aggfunc="first")


def changes(records: pd.DataFrame, metric: str, baseline: str = BASELINE_STRATEGY) -> pd.DataFrame:
    """Model x strategy (the baseline left out): each value's change relative to the
    baseline's on the same model, a fraction; models without a baseline value left out."""
    table = values(records, metric) if metric in records else pd.DataFrame()
    if baseline not in table:
        return pd.DataFrame()
    table = table[table[baseline].notna()]
    base = table.pop(baseline)
    change = table.sub(base, axis=0).div(base, axis=0)
    return change.mask(table.eq(base, axis=0), 0.0)  # equal values, 0 and 0 too: no change


def tally(change: pd.DataFrame) -> pd.DataFrame:
    """Per strategy (a column of :func:`changes`): models compared, lower, equal and higher on how many, the median
    change, the lowest and the highest with their models (none where they are no change)."""
    rows = []
    for strategy in change.columns:
        column = change[strategy].dropna()
        if column.empty:
            continue
        rows.append({"strategy": strategy, "models": len(column), "lower on": int((column < -EQUAL).sum()),
                     "equal on": int(column.abs().le(EQUAL).sum()), "higher on": int((column > EQUAL).sum()),
                     "median": column.median(),
                     "lowest": column.min(), "lowest on": column.idxmin() if abs(column.min()) > EQUAL else None,
                     "highest": column.max(), "highest on": column.idxmax() if abs(column.max()) > EQUAL else None})
    return pd.DataFrame(rows)
