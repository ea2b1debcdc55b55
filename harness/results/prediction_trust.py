"""How far a predicted GPU time can be trusted, in the words every view says it in (``gate``, ``explain``,
``explore``, ``profile``): its interval at the level the table names, its share outside the table's
support with the kernel families there, and whether a predicted difference between two programs lies in
nodes outside the support. Each reads a record's fields (``predicted_gpu_ms_low``, ...: docs/records.md)
from a record or a mapping of them, and says nothing where the table stated nothing."""

import pandas as pd

from harness.results.table import format_number


def listed(items: list[str], shown: int = 3) -> str:
    text = "; ".join(items[:shown])
    return f"{text}; and {len(items) - shown} more" if len(items) > shown else text


def _stated(fields, name: str):
    value = fields.get(name)
    return None if value is None or (not isinstance(value, dict) and pd.isna(value)) else value


def outside_ms(fields) -> float:
    """The predicted ms of a program's nodes outside its table's support."""
    return sum((_stated(fields, "predicted_outside_support") or {}).values())


def interval_note(fields) -> str | None:
    """``80 % interval LOW-HIGH ms``, where the table states one."""
    if _stated(fields, "predicted_gpu_ms_low") is None:
        return None
    return (f"{100 * fields['predicted_interval_level']:.0f} % interval "
            f"{format_number(fields['predicted_gpu_ms_low'])}-{format_number(fields['predicted_gpu_ms_high'])} ms")


def outside_note(fields) -> str | None:
    """``N % outside the table's support (families, most time first)``, where any is."""
    share, outside = _stated(fields, "predicted_outside_support_share"), _stated(fields, "predicted_outside_support")
    if not share or not outside:
        return None
    whole = "under 1" if share < 0.01 else f"{100 * share:.0f}"  # "0 %" would read as none
    return f"{whole} % outside the table's support ({listed(sorted(outside, key=outside.get, reverse=True))})"


def trust_notes(fields) -> list[str]:
    """What the table states of a program's predicted time: its interval and its share outside the support."""
    return [note for note in (interval_note(fields), outside_note(fields)) if note]


def predicted_line(fields, device: str | None = None) -> str:
    """A program's predicted time (on ``device``) and what the table states of it, in one line."""
    on = f" on {device}" if device else ""
    return "; ".join([f"predicted {format_number(fields['predicted_gpu_ms'])} ms{on}", *trust_notes(fields)])


def difference_note(base, cand) -> str | None:
    """Where the predicted difference of ``cand`` against ``base`` lies mostly in nodes outside
    the support (their outside time differs by at least half the difference), how much."""
    difference, outside = cand["predicted_gpu_ms"] - base["predicted_gpu_ms"], outside_ms(cand) - outside_ms(base)
    if not difference or abs(outside) < abs(difference) / 2:
        return None
    return (f"{format_number(outside)} of the {format_number(difference)} ms difference lies in nodes outside the "
            "table's support")
