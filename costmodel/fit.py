"""A device's cost table from what its runs measured (:class:`costmodel.measurements.Measurements`).

:func:`fit` makes the table (:class:`costmodel.table.CostTable`): the measured price of every
(node, input, output), the fitted model of every other
(:class:`costmodel.gradient_boosted.GradientBoostedModel`), and per operator the relative error
the fit is expected to make on a model it never saw: the model refitted with a few models left
out at a time, each left-out model's time of each operator compared with what it measured (the
median of those errors over models); its support (:mod:`costmodel.support`) and intervals
(:mod:`costmodel.intervals`), calibrated on the same held-out predictions; the probes
``layoutbench preferences`` asks, and the spread of identical programs' runs.
:func:`transferred` makes a new device's table from another's (the prior) and a few of its
programs, its expected errors measured the same way; :func:`topped_up`, a table with one
model's own measurements folded in. How well a table predicts a model it never saw is
:mod:`harness.inspection.validation`'s.
"""

from dataclasses import asdict, replace

import numpy as np
import pandas as pd

from costmodel.features import GraphLoad, node_features
from costmodel.gradient_boosted import GradientBoostedModel
from costmodel.intervals import Bounds, Intervals
from costmodel.kernel_families import kernel_family
from costmodel.measurements import Measurements, combined
from costmodel.queries import Query, graph_loads, node_queries
from costmodel.support import FEATURES as SUPPORT_FEATURES, Support
from costmodel.table import CostTable
from costmodel.transferred import TransferredModel, prior_ratios
from layoutkit.reference_strategies import BASELINE_STRATEGY, CALIBRATION_ROUND_PREFIX

FOLDS = 5  # models left out together when the fit's expected errors are measured
ERROR_QUANTILE = 0.5  # of the per-model errors of an operator: the error expected of it
SPREAD_QUANTILE = 0.9  # of the programs' ranges over their runs: the spread a table carries


def _training_set(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per (graph, node, input, output) measured: its median time over the programs
    and runs that measured it. A transition is its program's own (clones of two programs
    share names, not tensors)."""
    frame = frame.assign(key=frame["node"].where(~frame["transition"], frame["strategy"] + "/" + frame["node"]))
    key = ["graph", "key", "transition", "input", "output"]
    first = frame.drop_duplicates(key).set_index(key)
    medians = frame.groupby(key)["ms"].median()
    return first.drop(columns="ms").join(medians).reset_index().drop(columns="key")


def operator_errors(frame: pd.DataFrame, predicted: np.ndarray) -> pd.DataFrame:
    """Per (model, operator): |sum predicted - sum measured| / sum measured over the model's
    programs' nodes of that operator."""
    summed = frame.assign(predicted=predicted).groupby(["model", "operator"])[["predicted", "ms"]].sum()
    return ((summed["predicted"] - summed["ms"]).abs() / summed["ms"]).rename("error").reset_index()


PROBES_PER_OPERATOR = 12


def _probes(training: pd.DataFrame) -> dict:
    """Per operator, up to :data:`PROBES_PER_OPERATOR` nodes measured in two pairs or more,
    spread over their sizes, each with the pairs it was measured in."""
    nodes = training[~training["transition"]]
    loads = graph_loads(training)
    probes = {}
    for operator, group in nodes.groupby("operator"):
        pairs = group.groupby(["graph", "node"]).apply(lambda g: sorted(zip(g["input"], g["output"])),
                                                        include_groups=False)
        several = pairs[pairs.map(len) >= 2]
        if several.empty:
            continue
        first = group.drop_duplicates(["graph", "node"]).set_index(["graph", "node"]).loc[several.index]
        sizes = first["signature"].map(lambda s: np.prod(s["outputs"][0]) if s["outputs"] else 0).sort_values(
            kind="stable")
        chosen = sizes.index[np.linspace(0, len(sizes) - 1, min(PROBES_PER_OPERATOR, len(sizes))).round().astype(int)]
        probes[operator] = [{"signature": first.loc[key, "signature"], "pairs": [list(p) for p in several.loc[key]],
                             "load": asdict(loads.get(key[0], GraphLoad()))}
                            for key in dict.fromkeys(chosen)]
    return probes


def measured_prices(frame: pd.DataFrame, training: pd.DataFrame | None = None) -> dict:
    """The measured price of each (graph, node, input, output) of ``frame``'s operator nodes:
    its median time over the programs and runs that measured it."""
    training = _training_set(frame) if training is None else training
    return {(r.graph, r.node, r.input, r.output): float(r.ms) for r in training.itertuples(index=False)
            if not r.transition}


def fit(measurements: Measurements, folds: int = FOLDS) -> CostTable:
    frame = measurements.nodes
    training = _training_set(frame)
    table = CostTable(measurements.device, GradientBoostedModel.fit(training), measured_prices(frame, training),
                      limits=measurements.limits, support=Support.of(support_rows(node_queries(training))))
    models = sorted(frame["model"].unique())
    folds = min(folds, len(models))
    held_out = [_held_out(kept.nodes, left.nodes) for _, kept, left in
                (measurements.left_out(models, folds) if folds > 1 else [])]
    if held_out:
        table.errors = _expected_errors([operator_errors(left, left["predicted"]) for left in held_out])
        table.intervals = _intervals(pd.concat(held_out, ignore_index=True))
    table.probes = _probes(training)
    table.spread = program_spread(measurements.programs)
    table.corpus = _corpus(measurements, models, table)
    return table.identified()


def support_rows(queries: list[Query]) -> pd.DataFrame:
    """Per query, its kernel family and what sizes it (:data:`costmodel.support.FEATURES`)."""
    rows = []
    for query in queries:
        features = node_features(query.signature, query.input, query.output, query.transition)
        rows.append({"family": kernel_family(query.signature, query.input, query.output),
                     **{name: features[name] for name in SUPPORT_FEATURES}})
    return pd.DataFrame(rows, columns=["family", *SUPPORT_FEATURES])


def _held_out(kept: pd.DataFrame, left: pd.DataFrame) -> pd.DataFrame:
    """``left``'s nodes predicted by a fit of ``kept``'s: each one's ``predicted`` ms, its
    ``family`` and whether it lies ``outside`` that fit's support."""
    training = _training_set(kept)
    queries = node_queries(left)
    support, rows = Support.of(support_rows(node_queries(training))), support_rows(queries)
    outside = [support.outside(family, features) is not None
               for family, features in zip(rows["family"], rows[list(SUPPORT_FEATURES)].to_dict("records"))]
    return left.assign(predicted=GradientBoostedModel.fit(training).predict(queries), family=rows["family"].to_numpy(),
                       outside=outside)


def _intervals(held_out: pd.DataFrame) -> Intervals:
    """The intervals of held-out predictions (:func:`_held_out` of every fold): residuals of
    each program's time inside the support, of each program's time relative to the reference
    strategy's program of the same model and run, and of each model's time per family."""
    program = ["model", "run", "strategy"]
    held_out = held_out[~held_out["strategy"].str.startswith(CALIBRATION_ROUND_PREFIX)]  # rounds: no record states them
    inside = held_out[~held_out["outside"]].groupby(program)[["ms", "predicted"]].sum()
    inside = inside[inside["predicted"] > 0]
    whole = held_out.groupby(program)[["ms", "predicted"]].sum()
    ratio = np.log(whole["ms"] / whole["predicted"])
    reference = ratio.xs(BASELINE_STRATEGY, level="strategy") if BASELINE_STRATEGY in whole.index.get_level_values(
        "strategy") else pd.Series(dtype=float)
    others = ratio.drop(BASELINE_STRATEGY, level="strategy", errors="ignore")
    changes = (others - reference.reindex(others.droplevel("strategy").index).to_numpy()).dropna()
    families = held_out.groupby(["family", "model"])[["ms", "predicted"]].sum()
    family_ratio = np.log(families["ms"] / families["predicted"])
    return Intervals.of(np.log(inside["ms"] / inside["predicted"]).to_numpy(), changes.to_numpy(),
                        {family: r.to_numpy() for family, r in family_ratio.groupby(level="family")})


def _expected_errors(errors: list[pd.DataFrame]) -> dict:
    """Per operator, the error expected of a table: at :data:`ERROR_QUANTILE` of ``errors``
    (:func:`operator_errors` of models left out)."""
    by_operator = pd.concat(errors).groupby("operator")["error"].quantile(ERROR_QUANTILE)
    return {op: float(error) for op, error in by_operator.items()}


def _corpus(measurements: Measurements, models: list[str], table: CostTable) -> dict:
    corpus = {"models": models, "programs": len(measurements.programs),
              "runs": int(measurements.programs["run"].nunique()), "nodes": len(table.nodes)}
    return {**corpus, "measured_on": list(measurements.measured_on)} if measurements.measured_on else corpus


# How far a group's ratio is pulled towards its parent group's, in nodes' worth of weight: tried
# in turn, each budget's own models choosing (a device whose groups differ wants little; noisy
# runs, as lavapipe's, want much).
SHRINKS = (1.0, 5.0, 20.0, 80.0)


def _left_out_errors(ratios: Measurements, prior: CostTable, shrink: float) -> tuple[float, list, list]:
    """Each model's nodes priced by offsets fitted without it: the median |error| of its
    programs' summed time over all models' programs, its errors per operator, and its programs'
    residuals (log measured / predicted)."""
    programs, operators, residuals = [], [], []
    for _, kept, left in ratios.left_out():
        left = left.nodes
        predicted = left["prior_ms"].to_numpy() * np.exp2(
            TransferredModel.fit(kept.nodes, prior=prior, shrink=shrink).node_offsets(left))
        summed = left.assign(predicted=predicted).groupby("strategy")[["predicted", "ms"]].sum()
        programs.append((summed["predicted"] / summed["ms"] - 1).abs())
        operators.append(operator_errors(left, predicted))
        residuals += np.log(summed["ms"] / summed["predicted"]).tolist()
    return float(pd.concat(programs).median()), operators, residuals


def transferred(prior: CostTable, measurements: Measurements, ratios: pd.DataFrame | None = None) -> CostTable:
    """The new device's table from ``measurements`` and ``prior`` (:class:`TransferredModel`;
    ``ratios``: :func:`prior_ratios` of them, or of measurements they are part of, where the
    caller has them). How far a group's ratio is pulled towards its parent's is chosen from
    :data:`SHRINKS` by leaving each model out (its programs' median |error|); so is the expected
    error per operator, at :data:`ERROR_QUANTILE` over models, and the interval of a program
    inside the support (the prior's: its nodes are priced by the prior's fit). With one model:
    the middle shrink and the prior's errors and intervals."""
    ratios = replace(measurements, nodes=prior_ratios(prior, measurements) if ratios is None
                     else ratios.loc[measurements.nodes.index])
    models = sorted(ratios.nodes["model"].unique())
    shrink, expected, intervals = SHRINKS[len(SHRINKS) // 2], dict(prior.errors), prior.intervals
    if len(models) > 1:
        tried = {candidate: _left_out_errors(ratios, prior, candidate) for candidate in SHRINKS}
        shrink = min(SHRINKS, key=lambda candidate: tried[candidate][0])
        expected.update(_expected_errors(tried[shrink][1]))
        if intervals is not None:
            intervals = replace(intervals, program=Bounds.conformal(tried[shrink][2], intervals.level),
                                held_out={**intervals.held_out, "programs": len(tried[shrink][2])})
    table = CostTable(measurements.device, TransferredModel.fit(ratios.nodes, prior=prior, shrink=shrink),
                      measured_prices(measurements.nodes), expected, probes=prior.probes,
                      spread=program_spread(measurements.programs) or prior.spread, limits=measurements.limits,
                      support=prior.support, intervals=intervals)
    table.corpus = {**_corpus(measurements, models, table), "prior": prior.name, "shrink": shrink}
    return table.identified()


def topped_up(table: CostTable, measurements: Measurements, corpus: Measurements | None = None) -> CostTable:
    """``table`` with ``measurements`` (a model's, ``calibrate --top-up``'s) folded in: their
    nodes' measured prices win over the table's; with the table's ``corpus`` (the measurements
    it was fitted from), its fit made anew from both, so that its support grows too. Its corpus
    names the models ``topped_up``."""
    own = measured_prices(measurements.nodes)
    models = sorted({*table.corpus.get("topped_up", []), *measurements.programs["model"]})
    base = table if corpus is None else fit(combined([corpus, measurements], table.device))
    return replace(base, nodes={**table.nodes, **base.nodes, **own},
                   corpus={**base.corpus, "topped_up": models}).identified()


def program_spread(programs: pd.DataFrame) -> float:
    """How much runs of one program differ: the range of its processes' summed times over their
    median, at the ``SPREAD_QUANTILE`` of the measured programs (0 with none run twice)."""
    ranges = [(max(ms) - min(ms)) / float(np.median(ms)) for ms in programs["process_ms"] if len(ms) > 1]
    return float(np.quantile(ranges, SPREAD_QUANTILE)) if ranges else 0.0
