"""A device's cost table from what its runs measured (:class:`costmodel.measurements.Measurements`).

:func:`fit` makes the table (:class:`costmodel.table.CostTable`): the measured prices of
every (node, input, output), the fitted model of every other
(:class:`costmodel.gradient_boosted.GradientBoostedModel`), and the relative error the fit is
expected to make per operator on a model it never saw: the model refitted with a few models
left out at a time, each left-out model's time of each operator predicted and compared with
what it measured (the median of those errors over models); the probes ``layoutbench
preferences`` asks, and the spread of identical programs' runs.

How well a table predicts a model it never saw is :mod:`harness.inspection.validation`'s.
"""

from dataclasses import asdict

import numpy as np
import pandas as pd

from costmodel.features import GraphLoad
from costmodel.gradient_boosted import GradientBoostedModel
from costmodel.measurements import Measurements
from costmodel.queries import Query
from costmodel.table import CostTable

FOLDS = 5  # models left out together when the fit's expected errors are measured
ERROR_QUANTILE = 0.5  # of the per-model errors of an operator: the error expected of it
SPREAD_QUANTILE = 0.9  # of the programs' ranges over their runs: the spread a table carries


def _graph_loads(frame: pd.DataFrame) -> dict:
    """Per graph of ``frame`` (whole graphs' nodes), its :class:`GraphLoad`."""
    nodes = frame[~frame["transition"]].drop_duplicates(["graph", "node"])
    return nodes.groupby("graph")["signature"].agg(GraphLoad.of).to_dict()


def queries(frame: pd.DataFrame) -> list[Query]:
    loads = _graph_loads(frame)
    return [Query(row.signature, row.input, row.output, row.transition, row.graph, row.node,
                  loads.get(row.graph, GraphLoad())) for row in frame.itertuples(index=False)]


def _fitted(training: pd.DataFrame) -> GradientBoostedModel:
    return GradientBoostedModel.fitted(training, queries(training))


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
    loads = _graph_loads(training)
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


def _fold_of(models: list[str], folds: int) -> dict:
    return {model: index % folds for index, model in enumerate(sorted(models))}


def fit(measurements: Measurements, folds: int = FOLDS) -> CostTable:
    """The cost table of ``measurements`` (see the module)."""
    frame = measurements.nodes
    training = _training_set(frame)
    table = CostTable(measurements.device, _fitted(training), measured_prices(frame, training),
                      limits=measurements.limits)
    models = sorted(frame["model"].unique())
    folds = min(folds, len(models))
    fold = frame["model"].map(_fold_of(models, max(folds, 1)))
    errors = []
    for held_out in sorted(fold.unique()) if folds > 1 else []:
        kept, left = frame[fold != held_out], frame[fold == held_out]
        model = _fitted(_training_set(kept))
        errors.append(operator_errors(left, model.predict(queries(left))))
    if errors:
        by_operator = pd.concat(errors).groupby("operator")["error"].quantile(ERROR_QUANTILE)
        table.errors = {op: float(error) for op, error in by_operator.items()}
    table.probes = _probes(training)
    table.spread = program_spread(measurements.programs)
    table.corpus = {"models": models, "programs": len(measurements.programs),
                    "runs": int(measurements.programs["run"].nunique()), "nodes": len(table.nodes)}
    return table.identified()


def program_spread(programs: pd.DataFrame) -> float:
    """How much runs of one program differ: the range of its processes' summed times over their
    median, at the ``SPREAD_QUANTILE`` of the measured programs (0 with none run twice)."""
    ranges = [(max(ms) - min(ms)) / float(np.median(ms)) for ms in programs["process_ms"] if len(ms) > 1]
    return float(np.quantile(ranges, SPREAD_QUANTILE)) if ranges else 0.0
