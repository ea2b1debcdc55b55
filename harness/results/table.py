"""Records as a terminal table: the metrics that matter for each target, in readable units.

The default shows, per target, the schema's headline metrics that the records have; every
column on request (``columns="all"`` or a list). JSON and CSV output always carry every field.
"""

import pandas as pd

from harness.results.schema import METRICS
from harness.results.frames import frame, with_derived
from layoutkit import strict_json

_BINARY = (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))
_DECIMAL = (("G", 1e9), ("M", 1e6), ("k", 1e3))


def format_number(value: float) -> str:
    """Counts as whole numbers with separators (pandas makes a column float once it has a
    gap), other values to 4 significant digits."""
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:.4g}"


def _seconds(value: float) -> str:
    return f"{value * 1000:.3g} ms" if abs(value) < 1 else f"{value:,.3g} s" if abs(value) < 1000 else f"{value:,.0f} s"


def _prefixed(value: float, unit: str, prefixes=_DECIMAL) -> str:
    """``value`` in ``unit`` with the largest of ``prefixes`` it reaches."""
    for name, size in prefixes:
        if abs(value) >= size:
            return f"{value / size:.3g} {name}{unit}"
    return f"{value:,.0f} {unit}".rstrip()


def _change(value: float) -> str:
    """A relative change, signed, in per cent; from nothing (a zero baseline) as such."""
    if value in (float("inf"), float("-inf")):
        return "from 0"
    if value == 0:
        return "0 %"
    return f"{100 * value:+,.0f} %" if abs(value) >= 10 else f"{100 * value:+.3g} %"


FORMATS = {
    "count": format_number,
    # an ILP's objective, in its own units (a count, bytes, ms); a calibration round's is the negative of what it covers
    "score": format_number,
    "bytes": lambda v: _prefixed(v, "B", _BINARY),
    "seconds": _seconds,
    "ms": lambda v: _seconds(v / 1000),
    "fraction": lambda v: f"{100 * v:.3g} %" if abs(v) >= 1e-9 else "0 %",  # no float noise (1e-14 %)
    "change": _change,  # not a metric's unit: a metric's change relative to a baseline
    "cycles": lambda v: _prefixed(v, ""),
    "per_second": lambda v: f"{v:.3g}/s",
    "hertz": lambda v: _prefixed(v, "Hz"),
    "error": lambda v: f"{v:.2g}",
    "bool": lambda v: "yes" if v else "no",
}


def format_value(metric: str, value) -> str:
    """A metric's value in its unit; ``-`` where there is none."""
    if value is None or (not isinstance(value, (list, dict, str)) and pd.isna(value)):
        return "-"
    if metric in METRICS and isinstance(value, (int, float, bool)):
        return FORMATS[METRICS[metric].unit](value)
    return str(value)


def render_table(records: list[dict], columns: str | list[str] | None = None) -> str:
    """One table per target: model and strategy down, metrics across."""
    table = with_derived(frame(records))
    blocks = []
    for target, group in table.groupby("target", sort=False):
        if columns == "all":
            shown = [c for c in group.columns if c not in ("model", "strategy", "target") and group[c].notna().any()]
        elif columns:  # model and strategy are the rows, the target the header
            shown = [c for c in columns if c in group and c not in ("model", "strategy", "target")]
        else:  # the schema's headline metrics that these records have values for
            shown = ["status", *(name for name, m in METRICS.items()
                                 if m.heading and name in group and group[name].notna().any())]
        body = group.set_index(["model", "strategy"])[shown]
        cells = body.apply(lambda column: column.map(lambda v: format_value(column.name, v)))
        cells.columns = [METRICS[c].heading if c in METRICS and METRICS[c].heading and columns != "all" else c
                         for c in shown]
        header = f"{target}:" if table["target"].nunique() > 1 else ""
        blocks.append("\n".join(filter(None, [header, cells.to_string()])))
    return "\n\n".join(blocks)


def tables_json(result: dict) -> str:
    """A result whose values may be DataFrames, as strict JSON (each frame a list of rows)."""
    return strict_json.dumps({k: v.to_dict(orient="records") if isinstance(v, pd.DataFrame) else v
                              for k, v in result.items()}, indent=1, default=str)
