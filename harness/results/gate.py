"""The regression gate: a candidate results directory judged against a baseline one.

Both directories are written by ``layoutbench run``. Every (model, strategy, target)
the baseline has ``ok`` must be ``ok`` in the candidate too, every gated metric the baseline
has must be there to compare in the candidate (a null, a NaN or another way of measuring it
is a failure, never a pass), and none may grow past its threshold. Thresholds are absolute
(``transitions=0``: not one more) or relative (``transition_bytes=5%``). Every metric is
lower-is-better except those the schema calls higher-is-better (inferences per second),
where a drop is what is limited. A metric the schema gates only where records say how it
was measured (latency: timed by the runtime's events, ``latency_source``) is gated where
the baseline says so, and then fails where the candidate does not.
"""

import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from harness.results.schema import IDENTITY_KEYS, METRICS, default_thresholds, higher_is_better
from harness.results.frames import frame
from harness.results.store import MalformedRecordError, RecordStore, latest
from harness.results.table import format_number
from layoutkit.errors import UsageError

# Deterministic metrics (Vulkan and Arm), and the one timing that repeats closely enough
# between runs: latency from the runtime's events. Other timings would need repeats to gate on.
DEFAULT_THRESHOLDS = default_thresholds()


class GateError(UsageError):
    """The gate cannot judge: bad thresholds or unreadable results."""


@dataclass(frozen=True)
class Threshold:
    """How much a metric may get worse: ``limit`` in its unit, or a fraction of the baseline."""

    metric: str
    limit: float
    relative: bool

    def worsening(self, baseline: float, candidate: float) -> float:
        change = candidate - baseline
        return -change if higher_is_better(self.metric) else change

    def allows(self, baseline: float, candidate: float) -> bool:
        allowed = abs(baseline) * self.limit if self.relative else self.limit
        return self.worsening(baseline, candidate) <= allowed

    def __str__(self) -> str:
        return f"{self.limit * 100:g}%" if self.relative else f"{self.limit:g}"


def parse_thresholds(text: str) -> list[Threshold]:
    """``"transitions=0,transition_bytes=5%"`` -> thresholds, with one-line errors."""
    thresholds = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        metric, _, value = item.partition("=")
        metric, value = metric.strip(), value.strip()
        if metric not in METRICS:
            raise GateError(f"unknown metric '{metric}' in --threshold; known: {', '.join(METRICS)}")
        relative = value.endswith("%")
        try:
            limit = float(value[:-1] if relative else value)
        except ValueError:
            limit = math.nan
        if not math.isfinite(limit):  # nan and inf parse as floats, and no value compares with them
            raise GateError(f"threshold of {metric} must be a number or a percentage, not {value!r}")
        if limit < 0:
            raise GateError(f"threshold of {metric} must not be negative ({value})")
        thresholds.append(Threshold(metric, limit / 100 if relative else limit, relative))
    if not thresholds:
        raise GateError("--threshold names no metric; e.g. transitions=0,transition_bytes=5%")
    return thresholds


VALUELESS = "_valueless"  # a record's metrics held with no value (null, NaN): measured as nothing,
# where a metric a record does not hold at all was not measured (an older schema, another target)


def _records(directory: str | Path, role: str) -> pd.DataFrame:
    store = RecordStore(directory)
    if not store.path.exists():
        raise GateError(f"{role} directory {directory} has no {store.path.name}; write it with layoutbench run --out")
    records = latest(store.read())
    if not records:
        raise GateError(f"{role} results {store.path} hold no records")
    valueless = [{m for m in METRICS if m in record and _no_value(record[m])} for record in records]
    return frame(records).assign(**{VALUELESS: valueless}).set_index(list(IDENTITY_KEYS))


def _no_value(value) -> bool:
    return value is None or pd.isna(value)


def _value(record: pd.Series, metric: str):
    value = record.get(metric)
    return None if _no_value(value) else float(value)


def _measured_for_gating(record: pd.Series, metric: str) -> bool:
    """Whether ``record`` measured ``metric`` the way the schema requires for gating it."""
    condition = METRICS[metric].gated_where
    return condition is None or record.get(condition[0]) == condition[1]


def _gated(record: pd.Series, metric: str) -> float | None:
    """``metric`` of ``record`` where it has a value measured the way the schema requires for gating it."""
    return _value(record, metric) if _measured_for_gating(record, metric) else None


def _why_not_gated(record: pd.Series, metric: str) -> str:
    """Why a candidate record's ``metric`` cannot be compared (see :func:`_gated`)."""
    value, condition = record.get(metric), METRICS[metric].gated_where
    if _no_value(value):
        return "no value"
    return f"{condition[0]} {record.get(condition[0])!r} (not {condition[1]!r})"


MOSTLY_FITTED = 0.5  # below this share measured on the model itself, a predicted time is mostly the fit's


def _trust(record: pd.Series, metric: str) -> str | None:
    """For a predicted time that is mostly fitted (not measured on this model), how far to trust it."""
    if metric != "predicted_gpu_ms":
        return None
    share, error = record.get("predicted_measured_share"), record.get("predicted_error_expected")
    if share is None or pd.isna(share) or share >= MOSTLY_FITTED:
        return None
    expected = f", expected error {100 * error:.1f} %" if error is not None and not pd.isna(error) else ""
    return f"mostly fitted: {100 * share:.0f} % measured on this model{expected}"


def judge(baseline_dir: str | Path, candidate_dir: str | Path, thresholds: list[Threshold]) -> pd.DataFrame:
    """One row per (model, strategy, target, metric) gated, with the verdict.

    Verdicts: ``ok``, ``better``, ``worse`` (past the threshold), ``missing`` (the candidate
    has no ok record where the baseline has one, or one side has no value to compare where the
    other has one), ``new`` (only the candidate has it). Records no reader can use, in either
    directory, raise one :class:`MalformedRecordError` naming each.
    """
    read, malformed = {}, []
    for role, directory in (("baseline", baseline_dir), ("candidate", candidate_dir)):
        try:
            read[role] = _records(directory, role)
        except MalformedRecordError as error:
            malformed.append(str(error))
    if malformed:
        raise MalformedRecordError("\n".join(malformed))
    baseline, candidate = read["baseline"], read["candidate"]
    rows = []
    for key, base in baseline[baseline["status"] == "ok"].iterrows():
        identity = dict(zip(IDENTITY_KEYS, key))
        cand = candidate.loc[key] if key in candidate.index else None
        if cand is None or cand["status"] != "ok":
            reason = "not in candidate" if cand is None else f"candidate {cand['status']}: {cand['reason']}"
            rows.append({**identity, "metric": "status", "verdict": "missing", "note": reason})
            continue
        for threshold in thresholds:
            metric = threshold.metric
            before, after = _gated(base, metric), _gated(cand, metric)
            if before is None:
                if after is not None and metric in base[VALUELESS] and _measured_for_gating(base, metric):
                    rows.append({**identity, "metric": metric, "candidate": after, "verdict": "missing",
                                 "note": f"{metric} {format_number(after)} in the candidate, no value in the "
                                         "baseline: cannot compare"})
                continue
            if after is None:
                rows.append({**identity, "metric": metric, "baseline": before, "verdict": "missing",
                             "note": f"{metric} {format_number(before)} in the baseline, "
                                     f"{_why_not_gated(cand, metric)} in the candidate: cannot compare"})
                continue
            verdict = "ok" if threshold.allows(before, after) else "worse"
            if verdict == "ok" and threshold.worsening(before, after) < 0:
                verdict = "better"
            rows.append({
                **identity, "metric": metric, "baseline": before, "candidate": after,
                "delta": after - before, "delta_pct": 100 * (after - before) / before if before else None,
                "threshold": str(threshold), "verdict": verdict, "note": _trust(cand, metric),
            })
    for key in candidate.index.difference(baseline.index[baseline["status"] == "ok"]):
        if candidate.loc[key, "status"] == "ok":
            rows.append({**dict(zip(IDENTITY_KEYS, key)), "metric": "status", "verdict": "new",
                         "note": "no ok baseline record"})
    columns = [*IDENTITY_KEYS, "metric", "baseline", "candidate", "delta", "delta_pct", "threshold", "verdict", "note"]
    return pd.DataFrame(rows, columns=columns)


FAILING_VERDICTS = ("worse", "missing")


def failures(verdicts: pd.DataFrame) -> pd.DataFrame:
    return verdicts[verdicts["verdict"].isin(FAILING_VERDICTS)]
