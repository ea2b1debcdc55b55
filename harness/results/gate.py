"""The regression gate: a candidate results directory (``layoutbench run``) judged against a baseline one.

Every (model, strategy, target) the baseline has ``ok`` must be ``ok`` in the candidate, every gated metric
the baseline has must be there to compare (a null, a NaN or another way of measuring it fails, never passes),
and none may get worse past its threshold: absolute (``transitions=0``: not one more) or relative
(``transition_bytes=5%``); worse is higher, or lower for the metrics the schema calls higher-is-better
(inferences per second). A metric the schema gates only where records say how it was measured (latency
timed by the runtime's events, ``latency_source``) is gated where the baseline says so, and then fails where
the candidate does not. Values are compared only between records measured alike (one device, precision and
cost table: :data:`BASES`) unless the user asks otherwise; a gate that compared nothing is no pass.
"""

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from harness.results.schema import IDENTITY_KEYS, METRICS, Metric, default_thresholds, no_value
from harness.results.frames import frame
from harness.results.prediction_trust import difference_note, listed, trust_notes
from harness.results.store import MalformedRecordError, RecordStore
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
        return -change if METRICS[self.metric].better == "higher" else change

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
    records = store.latest()
    if not records:
        raise GateError(f"{role} results {store.path} hold no records")
    valueless = [{m for m in METRICS if m in record and no_value(record[m])} for record in records]
    return frame(records).assign(**{VALUELESS: valueless}).set_index(list(IDENTITY_KEYS))


def _measured_for_gating(record: pd.Series, metric: str) -> bool:
    """Whether ``record`` measured ``metric`` the way the schema requires for gating it."""
    condition = METRICS[metric].gated_where
    return condition is None or record.get(condition[0]) == condition[1]


def _gated(record: pd.Series, metric: str) -> float | None:
    """``metric`` of ``record`` where it has a value measured the way the schema requires for gating it."""
    value = record.get(metric)
    return None if no_value(value) or not _measured_for_gating(record, metric) else float(value)


def _why_not_gated(record: pd.Series, metric: str) -> str:
    """Why a candidate record's ``metric`` cannot be compared (see :func:`_gated`)."""
    value, condition = record.get(metric), METRICS[metric].gated_where
    if no_value(value):
        return "no value"
    return f"{condition[0]} {record.get(condition[0])!r} (not {condition[1]!r})"


MOSTLY_FITTED = 0.5  # below this share measured on the model itself, a predicted time is mostly the fit's


def _trust(base: pd.Series, cand: pd.Series, metric: str) -> str | None:
    """For a predicted time: how much of it the fit priced, the candidate's interval and share
    outside the table's support, and whether the difference lies mostly in nodes outside it."""
    if metric != "predicted_gpu_ms":
        return None
    measured = cand.get("predicted_measured_share")
    fitted = not no_value(measured) and measured < MOSTLY_FITTED
    notes = [f"mostly fitted: {100 * measured:.0f} % measured on this model" if fitted else None, *trust_notes(cand),
             difference_note(base, cand)]
    return "; ".join(filter(None, notes)) or None


def _environment(record: pd.Series) -> dict:
    environment = record.get("environment")
    return environment if isinstance(environment, dict) else {}


@dataclass(frozen=True)
class Basis:
    """Something a metric's value depends on besides the code measured (a device, a precision,
    a cost table), as records name it: two records' values of a metric it ``applies`` to are
    comparable only where they name the same one (or either names none)."""

    how: str  # how two records differ in it, in words
    named_by: Callable[[pd.Series], str | None]
    applies: Callable[[Metric], bool]

    def difference(self, baseline: pd.Series, candidate: pd.Series, metric: str) -> str | None:
        """How the two records of ``metric`` differ in this, in words, or None."""
        before, after = self.named_by(baseline), self.named_by(candidate)
        if not self.applies(METRICS[metric]) or no_value(before) or no_value(after) or before == after:
            return None
        return f"{self.how} ({before!r} vs {after!r})"


BASES = (
    Basis("in different precisions", lambda record: record.get("precision"), lambda metric: True),
    Basis("on different Vulkan devices", lambda record: _environment(record).get("vulkan_device"),
          lambda metric: not metric.deterministic),
    Basis("by different cost tables", lambda record: _environment(record).get("gpu_costs"),
          lambda metric: metric.priced),
)
ALLOW_INCOMPARABLE = "--allow-incomparable"  # the command line's flag that compares them all the same

COMPARED_VERDICTS = ("ok", "better", "worse", "missing")  # the rows where the gate compared the two
FAILING_VERDICTS = ("worse", "missing")


def _place(identity: dict) -> str:
    return " / ".join(str(identity[k]) for k in IDENTITY_KEYS)


def _row(identity: dict, metric: str, verdict: str, note: str | None, **values) -> dict:
    return {**identity, "metric": metric, **values, "verdict": verdict, "note": note}


def _status(role: str, record: pd.Series | None) -> str:
    """What ``role``'s record of an identity is, where it is not ok, in words."""
    return f"not in {role}" if record is None else f"{role} {record['status']}: {record['reason']}"


def _compare(identity: dict, base: pd.Series, cand: pd.Series | None, thresholds: list[Threshold],
             allow_incomparable: bool, incomparable: dict[str, list[str]]) -> list[dict]:
    """The rows of one identity the baseline has ok; metrics measured differently go into
    ``incomparable`` (how -> where) unless ``allow_incomparable``."""
    if cand is None or cand["status"] != "ok":
        return [_row(identity, "status", "missing", _status("candidate", cand))]
    rows, refused = [], False
    for threshold in thresholds:
        metric = threshold.metric
        before, after = _gated(base, metric), _gated(cand, metric)
        if before is None:
            if after is not None and metric in base[VALUELESS] and _measured_for_gating(base, metric):
                rows.append(_row(identity, metric, "missing", f"{metric} {format_number(after)} in the candidate, "
                                 "no value in the baseline: cannot compare", candidate=after))
            continue
        if after is None:
            rows.append(_row(identity, metric, "missing", f"{metric} {format_number(before)} in the baseline, "
                             f"{_why_not_gated(cand, metric)} in the candidate: cannot compare", baseline=before))
            continue
        differences = list(filter(None, (basis.difference(base, cand, metric) for basis in BASES)))
        if differences and not allow_incomparable:
            for difference in differences:
                incomparable.setdefault(difference, []).append(f"{_place(identity)} {metric}")
            refused = True
            continue
        across = f"measured {' and '.join(differences)}: compared by {ALLOW_INCOMPARABLE}" if differences else None
        verdict = "ok" if threshold.allows(before, after) else "worse"
        if verdict == "ok" and threshold.worsening(before, after) < 0:
            verdict = "better"
        note = "; ".join(filter(None, (_trust(base, cand, metric), across))) or None
        rows.append(_row(identity, metric, verdict, note, baseline=before, candidate=after, delta=after - before,
                         delta_pct=100 * (after - before) / before if before else None, threshold=str(threshold)))
    if not rows and not refused:
        rows.append(_row(identity, "status", "uncompared",
                         "no gated metric of the baseline record has a value the gate can compare"))
    return rows


def judge(baseline_dir: str | Path, candidate_dir: str | Path, thresholds: list[Threshold],
          allow_incomparable: bool = False) -> pd.DataFrame:
    """One row per (model, strategy, target, metric) gated, with the verdict: ``ok``, ``better``,
    ``worse`` (past the threshold), ``missing`` (the candidate has no ok record where the baseline has
    one, or one side has no value to compare where the other has one), ``new`` (only the candidate has it
    ok), ``uncompared`` (a row of ``status``: neither has it ok, or the baseline's has no gated metric to
    compare). Records no reader can use, in either directory, raise one :class:`MalformedRecordError`
    naming each; a gate that would compare nothing, or values measured on different devices, in different
    precisions or by different cost tables (:data:`BASES`; unless ``allow_incomparable``), a :class:`GateError`.
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
    rows, incomparable = [], {}
    for key in [*baseline.index, *candidate.index.difference(baseline.index)]:
        identity = dict(zip(IDENTITY_KEYS, key))
        base = baseline.loc[key] if key in baseline.index else None
        cand = candidate.loc[key] if key in candidate.index else None
        if base is not None and base["status"] == "ok":
            rows += _compare(identity, base, cand, thresholds, allow_incomparable, incomparable)
        elif cand is not None and cand["status"] == "ok":
            rows.append(_row(identity, "status", "new", _status("baseline", base)))
        else:
            rows.append(_row(identity, "status", "uncompared",
                             f"{_status('baseline', base)}; {_status('candidate', cand)}"))
    if incomparable:
        measured = "; ".join(f"{how}: {listed(places)}" for how, places in incomparable.items())
        raise GateError(f"the baseline and the candidate were measured {measured}: their values are not "
                        f"comparable; gate results of one device, precision and cost table, or pass "
                        f"{ALLOW_INCOMPARABLE} to compare them all the same")
    columns = [*IDENTITY_KEYS, "metric", "baseline", "candidate", "delta", "delta_pct", "threshold", "verdict", "note"]
    verdicts = pd.DataFrame(rows, columns=columns)
    if not verdicts["verdict"].isin(COMPARED_VERDICTS).any():
        unmatched = [f"{_place(row)}: {row['note']}" for row in rows]
        raise GateError(f"the gate compared nothing: {listed(unmatched)}; measure the baseline where these "
                        "records can be ok, or gate metrics its records hold (--threshold)")
    return verdicts


def failures(verdicts: pd.DataFrame) -> pd.DataFrame:
    return verdicts[verdicts["verdict"].isin(FAILING_VERDICTS)]
