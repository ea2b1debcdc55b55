"""How well a device's cost table predicts models it never saw: leave one model out
(``calibrate --validate``).

For each model, :func:`held_out` fits a table without any of its nodes and prices each of its
programs with it (:func:`predicted_programs`), against what the program measured;
:func:`summary` says per model how far off the table is and whether it orders the
programs as measured.

A fit takes seconds to minutes, so the command keeps each held-out table
(``OUT/held-out/MODEL.json``, written whole or not at all) and an interrupted validation
resumes from them. A held-out table carries in its corpus the key it was fitted under
(:func:`fit_key`: a digest of the measurements, the device's limits, and the fit's code and
libraries); :func:`kept_tables` takes back only tables of the same key that leave their own
model out, so a table of other measurements, limits or code is fitted again, never reused.

A record under a table that knows its support and intervals states an interval of its
predicted time at a named level (:mod:`costmodel.intervals`); :func:`stated_intervals` states
them of measured programs as a record's would be, and :func:`interval_line` says how often
each program's measured time lies inside the interval its held-out table states of it,
against the level the intervals name.
"""

import hashlib
import json
import sys
from concurrent.futures import Executor, as_completed
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd

from costmodel.fit import fit
from costmodel.measurements import NODE_COLUMNS, PROGRAM, PROGRAM_COLUMNS, Measurements
from costmodel.prediction import Prediction
from costmodel.queries import node_queries
from costmodel.table import CostTable, parse
from harness.errors import UsageError
from harness.results.provenance import code_digest, tool_versions

FIT_LIBRARIES = ("lightgbm", "numpy", "pandas")


def predicted_programs(measurements: Measurements, table: CostTable) -> pd.DataFrame:
    """Per program: what it measured (the median and range of its processes' summed times),
    what ``table`` predicts of its nodes, the interval it states of that and the share outside
    its support (:func:`stated_intervals`)."""
    queries = node_queries(measurements.nodes)
    prices = table.price(queries)
    predicted = measurements.nodes.assign(predicted=[price.ms for price in prices]).groupby(PROGRAM)["predicted"]
    programs = measurements.programs.set_index(PROGRAM)
    process_ms = programs["process_ms"]
    return pd.DataFrame({
        "costs": programs["costs"], "measured_ms": process_ms.map(np.median), "low_ms": process_ms.map(min),
        "high_ms": process_ms.map(max), "predicted_ms": predicted.sum(),
    }).join(stated_intervals(measurements.nodes, queries, prices, table, PROGRAM)).assign(
        error=lambda f: f["predicted_ms"] / f["measured_ms"] - 1).reset_index()


def stated_intervals(nodes: pd.DataFrame, queries: list, prices: list, table: CostTable,
                     program: list[str]) -> pd.DataFrame:
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


def fit_key(measurements: Measurements) -> str:
    """What the held-out tables of ``measurements`` are fitted from, as a digest: every node and
    program measured, the device and its limits, the fit's code (this module's and all of ours
    it reaches) and its libraries' versions."""
    limits = measurements.limits.to_json() if measurements.limits is not None else None
    what = {"device": measurements.device, "limits": limits,
            "programs": measurements.programs[PROGRAM_COLUMNS].values.tolist(),
            "nodes": measurements.nodes[NODE_COLUMNS].values.tolist(),
            "code": code_digest(sys.modules[__name__]), "libraries": tool_versions(FIT_LIBRARIES)}
    return hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()[:16]


def left_out_programs(measurements: Measurements, fit_kept, models=None) -> pd.DataFrame:
    """Each of ``models``' programs (default: every model's) predicted by ``fit_kept`` (a function
    of measurements to a table) of the measurements of every other model."""
    return pd.concat([predicted_programs(own, fit_kept(kept)) for _, kept, own in measurements.left_out(models)],
                     ignore_index=True)


def _predicted_by(table: CostTable, measurements: Measurements, model: str) -> pd.DataFrame:
    """``model``'s programs, each with its time predicted by ``table`` (named) and what it measured."""
    return predicted_programs(measurements.of_models([model]), table).assign(table=table.name)


def held_out(measurements: Measurements, model: str, key: str) -> tuple[pd.DataFrame, CostTable]:
    """``model``'s programs, each with its time predicted by a table fitted without that model
    (under ``key``: see the module) and what it measured; and that table."""
    table = fit(measurements.of_models([model], kept=False))
    table.corpus["fit_key"] = key
    table = table.identified()
    return _predicted_by(table, measurements, model), table


def kept_tables(paths: dict, key: str) -> dict:
    """Of the held-out tables at ``paths`` (model -> path), those fitted under ``key`` without
    their model, by model; a missing or unreadable one is left to fit."""
    kept = {}
    for model, path in paths.items():
        try:
            table = parse(Path(path).read_bytes(), str(path))
        except (OSError, UsageError):
            continue
        # the key is the measurements', whichever model a table leaves out: its corpus says which
        if table.corpus.get("fit_key") == key and model not in table.corpus.get("models", [model]):
            kept[model] = table
    return kept


def leave_one_model_out(measurements: Measurements, models: list[str] | None = None,
                        fitted=lambda model, table, done, total: None, executor: Executor | None = None,
                        kept: dict | None = None, key: str | None = None) -> tuple[pd.DataFrame, dict]:
    """:func:`held_out` for each model: the programs of all, and the tables (model ->
    CostTable), each with its own expected errors. ``kept``: tables of some models already
    fitted under ``key`` (default: :func:`fit_key` of ``measurements``), used as they are; the
    others are fitted, each handed to ``fitted`` as it is made (a fit takes seconds to minutes).
    ``executor`` (of processes): the fits run there, several at once, with the same results as
    one after another here."""
    models = models or sorted(measurements.programs["model"].unique())
    kept, key = kept or {}, key or fit_key(measurements)
    missing = [model for model in models if model not in kept]
    if executor:
        futures = {executor.submit(held_out, measurements, model, key): model for model in missing}
        made = ((futures[future], future.result()) for future in as_completed(futures))
    else:
        futures, made = {}, ((model, held_out(measurements, model, key)) for model in missing)
    results = {model: _predicted_by(table, measurements, model) for model, table in kept.items()}
    tables = dict(kept)
    try:
        for done, (model, (programs, table)) in enumerate(made, 1):
            results[model], tables[model] = programs, table
            fitted(model, table, done, len(missing))
    finally:
        for future in futures:
            future.cancel()  # an interrupted or failed fit leaves none queued behind it
    return pd.concat([results[model] for model in models], ignore_index=True), {model: tables[model] for model in models}


def strategy_programs(programs: pd.DataFrame) -> pd.DataFrame:
    """Of predicted programs (:func:`predicted_programs`), those of layout strategies
    (calibration rounds aside), one per (model, strategy): all its runs' processes together
    (the median of their measured and of their predicted times, the widest range, the interval
    stated of it). A program's runs predict alike: apart, two of them measured apart would
    be a pair no prediction orders."""
    from strategies.calibration import is_round

    chosen = programs[~programs["strategy"].map(is_round)]
    return chosen.groupby(["model", "strategy"], as_index=False).agg(
        measured_ms=("measured_ms", "median"), low_ms=("low_ms", "min"), high_ms=("high_ms", "max"),
        predicted_ms=("predicted_ms", "median"), predicted_low_ms=("predicted_low_ms", "first"),
        predicted_high_ms=("predicted_high_ms", "first"), outside_share=("outside_share", "first"))


def ordered_pairs(programs: pd.DataFrame) -> tuple[int, int]:
    """Of one model's programs, one per strategy (:func:`strategy_programs`), the pairs whose
    measured ranges do not overlap: how many the prediction orders as measured, and how many."""
    if programs["strategy"].duplicated().any():
        raise ValueError("a strategy's program appears more than once: merge its runs first (strategy_programs)")
    apart = [(a, b) for a, b in combinations(programs.itertuples(index=False), 2)
             if a.high_ms < b.low_ms or b.high_ms < a.low_ms]
    return sum((a.measured_ms < b.measured_ms) == (a.predicted_ms < b.predicted_ms) for a, b in apart), len(apart)


def summary(programs: pd.DataFrame) -> pd.DataFrame:
    """Per model, from :func:`leave_one_model_out`'s programs: the median and worst absolute
    error over its strategies' programs, how many of them measured within the interval the
    held-out table states (:func:`within_interval`) and their largest share outside
    its support; of the pairs of them whose measured times differ beyond their ranges, how many
    the held-out table orders as measured; and ilp-time (lowered under the held-out table)
    against the faster of ilp and bfs-downstream, and against bfs-downstream, measured
    (``beyond_spread``: slower than the faster one's slowest process)."""
    # an ilp-time program counts only where it was lowered under its model's held-out table, which predicts it
    lowered_under = (programs["strategy"] != "ilp-time") | (programs["costs"] == programs["table"])
    rows = []
    for model, group in strategy_programs(programs[lowered_under]).groupby("model"):
        by_strategy = group.set_index("strategy")
        errors = (group["predicted_ms"] / group["measured_ms"] - 1).abs()
        agreeing, pairs = ordered_pairs(group)
        row = {"model": model, "programs": len(group), "median_error": errors.median(), "worst_error": errors.max(),
               "within_interval": f"{int(within_interval(group).sum())}/{len(group)}",
               "outside_share": group["outside_share"].max(),
               "ordered_pairs": f"{agreeing}/{pairs}", "ilp_time_vs_best": None, "beyond_spread": None,
               "ilp_time_vs_bfs_downstream": None}
        others = by_strategy.loc[[s for s in ("ilp", "bfs-downstream") if s in by_strategy.index]]
        if "ilp-time" in by_strategy.index and len(others):
            own, best = by_strategy.loc["ilp-time"], others.loc[others["measured_ms"].idxmin()]
            row.update(ilp_time_vs_best=own["measured_ms"] / best["measured_ms"] - 1,
                       beyond_spread=bool(own["low_ms"] > best["high_ms"]))
            if "bfs-downstream" in by_strategy.index:
                downstream = by_strategy.loc["bfs-downstream", "measured_ms"]
                row["ilp_time_vs_bfs_downstream"] = own["measured_ms"] / downstream - 1
        rows.append(row)
    return pd.DataFrame(rows)
