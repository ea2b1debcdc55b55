"""A new device's cost table from a handful of programs and another device's table, and how
well that holds on models the new device's table never saw.

A *prior* is an existing device's table (``docs/cost-table/h100.json``) with the node
measurements it was fitted from (``h100-nodes.jsonl.gz`` beside it). For a new device:

- :func:`choose_programs` picks the programs that teach the most about it for their cost. A
  node teaches where the prior's corpus spends time (the corpus stands in for the catalog:
  its models were chosen to cover the catalog's operators) and where the prior is unsure:
  each (operator, input, output, time scale) is worth the square root of its share of the
  corpus's measured time, times one plus the prior's expected error of the operator. A
  program's gain is what its nodes add to each one's coverage, with diminishing returns
  (the square root of the nodes covered); its cost is its size (its nodes over the median
  program's: lowering time grows with them), times 1 + :data:`MODEL_COST` where its model
  is not chosen yet. Greedy by gain per cost.
- :func:`transferred` fits the new device's table from those programs' measurements: the
  prior's price times the new device's log2 ratio to it, per (operator, input, output),
  each the median over models of each model's median (a model measured under another load,
  or a few nodes far off, do not carry it), shrunk towards the operator's and the device's
  as far as leaving each of the budget's models out says (:data:`SHRINKS`;
  :class:`costmodel.transferred.TransferredModel`); the new device's measured nodes
  win where they exist.
- :func:`prior_check` says whether the prior holds as it is: where a table transferred from
  the same programs would not predict them better, by more than the prior's spread, than
  the prior alone (each program predicted with its model left out of the transfer).
- :func:`study` is the proof: budgets of programs chosen on a device that measured a whole
  corpus, and the table they give scored on that device's programs of the models they left
  out, beside the prior as it is and scaled by one factor, the budget's programs fitted
  alone, and the device's whole table with each model left out.
"""

import math
from collections import Counter
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from costmodel.fit import ERROR_QUANTILE, fit, measured_prices, operator_errors, program_spread, queries
from costmodel.measurements import Measurements
from costmodel.queries import ANY
from costmodel.table import UNSEEN_OPERATOR_ERROR, CostTable
from costmodel.transferred import TransferredModel
from harness.inspection import validation
from models import FP16_SUFFIX

# How far a group's ratio is pulled towards its parent group's, in nodes' worth of weight: tried
# in turn, each budget's own models choosing (a device whose groups differ wants little; noisy
# runs, as lavapipe's, want much).
SHRINKS = (1.0, 5.0, 20.0, 80.0)
# A program whose model is not chosen yet costs its lowering prefix too, in programs' worth. 0:
# a device's ratio to the prior differs from model to model, so a new model teaches more than
# another program of one chosen (lavapipe, 10 programs: 5 models, median error 32 %; at 2,
# 2 models and 63 %), and a program's size already prices its lowering.
MODEL_COST = 0.0
BUDGETS = (5, 10, 20, 40)
# A prior off by more than this on the check programs (median) does not hold, however poorly a
# transfer from them predicts: nn-Meter's and LitePred's bound for a usable prediction.
HOLDS_WITHIN = 0.10
PROGRAM = ["model", "strategy"]


def prior_ratios(prior: CostTable, measurements: Measurements) -> pd.DataFrame:
    """``measurements``' nodes, each with the prior's price of it and log2 of its time over that."""
    nodes = measurements.nodes
    prior_ms = np.array([price.ms for price in prior.price(queries(nodes))])
    return nodes.assign(prior_ms=prior_ms, log2_ratio=np.log2(nodes["ms"].to_numpy() / prior_ms))


def _shrunk(ratios: pd.DataFrame, by: list[str], parent, shrink: float) -> pd.Series:
    """Per group of ``ratios`` by ``by``: the median over its models of each one's median log2
    ratio, pulled towards ``parent(key)`` with the weight of ``shrink`` nodes."""
    per_model = ratios.groupby([*by, "model"])["log2_ratio"].median()
    center = per_model.groupby(level=list(range(len(by)))).median()
    count = ratios.groupby(by).size()
    parents = np.array([parent(key) for key in center.index], dtype=float)
    return (center * count + shrink * parents) / (count + shrink)


def fit_offsets(ratios: pd.DataFrame, shrink: float) -> dict:
    """The new device's log2 ratios to the prior (see :class:`TransferredModel`)."""
    device = float(ratios.groupby("model")["log2_ratio"].median().median())
    operators = _shrunk(ratios, ["operator"], lambda _: device, shrink)
    pairs = _shrunk(ratios, ["operator", "input", "output"], lambda key: operators[key[0]], shrink)
    return {(ANY, ANY, ANY): device, **{(op, ANY, ANY): float(v) for op, v in operators.items()},
            **{key: float(v) for key, v in pairs.items()}}


def _offsets_of(offsets: dict, frame: pd.DataFrame) -> np.ndarray:
    """Each node's offset (see :meth:`TransferredModel.offset`)."""
    device = offsets[(ANY, ANY, ANY)]
    return np.array([offsets.get((op, i, o), offsets.get((op, ANY, ANY), device))
                     for op, i, o in zip(frame["operator"], frame["input"], frame["output"])])


def _left_out_errors(ratios: pd.DataFrame, shrink: float) -> tuple[float, pd.DataFrame]:
    """Each model's nodes priced by offsets fitted without it: the median |error| of its
    programs' summed time over all models' programs, and its errors per operator."""
    programs, operators = [], []
    for model in sorted(ratios["model"].unique()):
        kept, left = ratios[ratios["model"] != model], ratios[ratios["model"] == model]
        predicted = left["prior_ms"].to_numpy() * np.exp2(_offsets_of(fit_offsets(kept, shrink), left))
        summed = left.assign(predicted=predicted).groupby("strategy")[["predicted", "ms"]].sum()
        programs.append((summed["predicted"] / summed["ms"] - 1).abs())
        operators.append(operator_errors(left, predicted))
    return float(pd.concat(programs).median()), pd.concat(operators)


def _scaled(prior: CostTable, device: str, factor: float) -> CostTable:
    """The prior, every price times ``factor``."""
    return CostTable(device, TransferredModel(prior, {(ANY, ANY, ANY): math.log2(factor)}), errors=prior.errors,
                     probes=prior.probes, spread=prior.spread).identified()


def one_factor(prior: CostTable, measurements: Measurements, ratios: pd.DataFrame | None = None) -> CostTable:
    """The prior scaled by the one factor that makes its programs' total time the measured total
    (``ratios``: :func:`prior_ratios` of ``measurements``, where the caller has them)."""
    predicted = (ratios["prior_ms"].sum() if ratios is not None
                 else validation.predicted_programs(measurements, prior)["predicted_ms"].sum())
    return _scaled(prior, measurements.device, measurements.programs["process_ms"].map(np.median).sum() / predicted)


def transferred(prior: CostTable, measurements: Measurements, ratios: pd.DataFrame | None = None) -> CostTable:
    """The new device's table from ``measurements`` and ``prior`` (see the module;
    ``ratios``: :func:`prior_ratios` of them, where the caller has it). How far a group's
    ratio is pulled towards its parent's is chosen from :data:`SHRINKS` by leaving each model
    out (its programs' median |error|); so is the expected error per operator, at
    :data:`ERROR_QUANTILE` over models. With one model: the middle shrink and the
    prior's errors."""
    ratios = prior_ratios(prior, measurements) if ratios is None else ratios
    models = sorted(ratios["model"].unique())
    shrink, expected = SHRINKS[len(SHRINKS) // 2], dict(prior.errors)
    if len(models) > 1:
        tried = {candidate: _left_out_errors(ratios, candidate) for candidate in SHRINKS}
        shrink = min(SHRINKS, key=lambda candidate: tried[candidate][0])
        by_operator = tried[shrink][1].groupby("operator")["error"].quantile(ERROR_QUANTILE)
        expected.update({op: float(error) for op, error in by_operator.items()})
    table = CostTable(measurements.device, TransferredModel(prior, fit_offsets(ratios, shrink)),
                      measured_prices(measurements.nodes), expected, probes=prior.probes,
                      spread=program_spread(measurements.programs) or prior.spread,
                      limits=measurements.limits)
    table.corpus = {"models": models, "programs": len(measurements.programs),
                    "runs": int(measurements.programs["run"].nunique()), "nodes": len(table.nodes),
                    "prior": prior.name, "shrink": shrink}
    return table.identified()


def _transferred_part(prior: CostTable, part: Measurements, ratios: pd.DataFrame) -> CostTable:
    """:func:`transferred` of ``part`` of the measurements whose :func:`prior_ratios` are ``ratios``."""
    return transferred(prior, part, ratios.loc[part.nodes.index])


def _program_keys(candidates: Measurements, prior: CostTable) -> tuple[dict, dict]:
    """Per candidate program, how many of its nodes fall in each (operator, input, output, time
    scale); and each of those keys' worth (see the module)."""
    nodes = candidates.nodes
    scale = np.floor(np.log2(nodes["ms"].clip(lower=1e-6)) / 2).astype(int)
    keyed = nodes.assign(key=list(zip(nodes["operator"], nodes["input"], nodes["output"], scale)))
    distinct = keyed.drop_duplicates(["graph", "node", "input", "output", "strategy"])
    share = distinct.groupby("key")["ms"].sum()
    share /= share.sum()
    worth = {key: math.sqrt(s) * (1 + prior.errors.get(key[0], UNSEEN_OPERATOR_ERROR)) for key, s in share.items()}
    counts = {program: Counter(group["key"]) for program, group in distinct.groupby(PROGRAM)}
    return counts, worth


def _sizes(candidates: Measurements) -> dict:
    """Per candidate program, its nodes over the median program's: what lowering it costs."""
    nodes = candidates.nodes.groupby(PROGRAM)["node"].nunique()
    return (nodes / nodes.median()).to_dict()


def choose_programs(candidates: Measurements, prior: CostTable, budget: int, among=None) -> pd.DataFrame:
    """Up to ``budget`` programs of ``candidates`` (a prior's kept measurements; ``among``: of
    these (model, strategy) only), in the order chosen, each with its gain, cost and the
    operators it was the first to cover (see the module)."""
    counts, worth = _program_keys(candidates, prior)
    sizes = _sizes(candidates)
    if among is not None:
        counts = {program: c for program, c in counts.items() if program in set(among)}
    covered, models, chosen = Counter(), set(), []
    while counts and len(chosen) < budget:
        def gain(program):
            return sum(worth[key] * (math.sqrt(covered[key] + n) - math.sqrt(covered[key]))
                       for key, n in counts[program].items())

        def cost(program):
            return sizes[program] * (1.0 + (MODEL_COST if program[0] not in models else 0.0))

        program = max(sorted(counts), key=lambda p: gain(p) / cost(p))
        operators = {key[0] for key in counts[program]} - {key[0] for key in covered}
        chosen.append({"model": program[0], "strategy": program[1], "gain": gain(program), "cost": cost(program),
                       "new_operators": len(operators)})
        covered.update(counts.pop(program))
        models.add(program[0])
    return pd.DataFrame(chosen, columns=["model", "strategy", "gain", "cost", "new_operators"])


def subset(measurements: Measurements, programs=None, models=None) -> Measurements:
    """The part of ``measurements`` of the (model, strategy) ``programs``, or of ``models``."""
    programs = None if programs is None else list(programs)
    models = None if models is None else list(models)

    def keep(frame):
        if programs is not None:
            return frame[pd.MultiIndex.from_frame(frame[PROGRAM]).isin(programs)]
        return frame[frame["model"].isin(models)]

    return replace(measurements, nodes=keep(measurements.nodes), programs=keep(measurements.programs))


@dataclass
class PriorCheck:
    """Whether a prior holds on a device, from a few programs measured there."""

    prior_error: float  # median |error| of the prior's predictions of the programs
    transferred_error: float  # the same of tables transferred without each program's model
    factor: float  # measured total over the prior's predicted total
    spread: float  # the prior's

    @property
    def holds(self) -> bool:
        """The prior predicts the programs within :data:`HOLDS_WITHIN`, and tables transferred
        without each one's model do not predict them better by more than the prior's spread."""
        return self.prior_error <= HOLDS_WITHIN and self.transferred_error >= self.prior_error - self.spread


def prior_check(prior: CostTable, measurements: Measurements, ratios: pd.DataFrame | None = None) -> PriorCheck:
    """:class:`PriorCheck` of ``measurements`` (programs of two models or more; ``ratios``:
    :func:`prior_ratios` of them, where the caller has them)."""
    models = sorted(measurements.programs["model"].unique())
    if len(models) < 2:
        raise ValueError("checking a prior needs programs of two models or more")
    own = validation.predicted_programs(measurements, prior)
    ratios = prior_ratios(prior, measurements) if ratios is None else ratios
    left_out = pd.concat([validation.predicted_programs(subset(measurements, models=[m]), _transferred_part(
        prior, measurements.without(m), ratios)) for m in models])
    return PriorCheck(float(own["error"].abs().median()), float(left_out["error"].abs().median()),
                      float(own["measured_ms"].sum() / own["predicted_ms"].sum()), prior.spread)


def scores(programs: pd.DataFrame) -> dict:
    """Of predicted programs (:func:`validation.predicted_programs`), per model the median
    |error| over its layout strategies' programs (:func:`validation.strategy_programs`:
    calibration rounds aside, each program's runs together), summarised over models: median
    and worst, the share within 5 % and within 10 %; of each model's pairs of programs measured
    apart (:func:`validation.ordered_pairs`), the share the prediction orders as measured; and
    the median over models of Kendall's tau between measured and predicted."""
    from scipy.stats import kendalltau

    per_model = []
    for _, group in validation.strategy_programs(programs).groupby("model"):
        per_model.append((float((group["predicted_ms"] / group["measured_ms"] - 1).abs().median()),
                          *validation.ordered_pairs(group),
                          kendalltau(group["measured_ms"], group["predicted_ms"]).statistic if len(group) > 1
                          else np.nan))
    errors, agreeing, pairs, taus = (np.array(column, dtype=float) for column in zip(*per_model))
    return {"models": len(per_model), "median_error": float(np.median(errors)), "worst_error": float(errors.max()),
            "within_5": float(np.mean(errors <= 0.05)), "within_10": float(np.mean(errors <= 0.10)),
            "pairs_ordered": float(agreeing.sum() / pairs.sum()) if pairs.sum() else np.nan,
            "kendall_tau": float(np.nanmedian(taus)) if not np.isnan(taus).all() else np.nan}


def _left_out(measurements: Measurements, models, fit) -> pd.DataFrame:
    """Each of ``models``' programs predicted by ``fit(measurements without it)``."""
    return pd.concat([validation.predicted_programs(subset(measurements, models=[m]), fit(measurements.without(m)))
                      for m in models], ignore_index=True)


def study(prior: CostTable, candidates: Measurements, held_out: Measurements, budgets=BUDGETS,
          progress=lambda message: None) -> pd.DataFrame:
    """Per budget and method, :func:`scores` on ``held_out``'s programs of the models the
    budget's programs left out (see the module); budget ``None``: the whole of ``held_out``,
    each model left out in turn."""
    models = sorted(held_out.programs["model"].unique())
    progress(f"the whole table of {held_out.device} without each of {len(models)} models")
    whole = _left_out(held_out, models, lambda kept: fit(kept, folds=1))
    # a program computed in half precision is chosen as the prior's program of its model
    measured = {(model.removesuffix(FP16_SUFFIX), strategy): (model, strategy)
                for model, strategy in held_out.programs[PROGRAM].itertuples(index=False, name=None)}
    ratios = prior_ratios(prior, held_out)  # priced once: every fit below takes its part
    rows = []
    for budget in budgets:
        chosen = choose_programs(candidates, prior, budget, among=list(measured))
        programs = [measured[program] for program in chosen[PROGRAM].itertuples(index=False, name=None)]
        fitted = subset(held_out, programs=programs)
        scored = [m for m in models if m not in {model for model, _ in programs}]
        progress(f"{budget} programs of {len(models) - len(scored)} models, scored on {len(scored)}")
        own = subset(held_out, models=scored)
        for method, table in (("few-shot", _transferred_part(prior, fitted, ratios)),
                              ("prior, one factor", one_factor(prior, fitted, ratios.loc[fitted.nodes.index])),
                              ("budget alone", fit(fitted, folds=1))):
            rows.append({"budget": budget, "method": method, **scores(validation.predicted_programs(own, table))})
        rows.append({"budget": budget, "method": "prior as it is", **scores(validation.predicted_programs(own, prior))})
        rows.append({"budget": budget, "method": "whole table, model left out",
                     **scores(whole[whole["model"].isin(scored)])})
    progress(f"every program, each of {len(models)} models left out")
    for method, fit_kept in (("few-shot", lambda kept: _transferred_part(prior, kept, ratios)),
                        ("prior, one factor", lambda kept: one_factor(prior, kept, ratios.loc[kept.nodes.index]))):
        rows.append({"budget": None, "method": method, **scores(_left_out(held_out, models, fit_kept))})
    rows.append({"budget": None, "method": "prior as it is", **scores(validation.predicted_programs(held_out, prior))})
    rows.append({"budget": None, "method": "whole table, model left out", **scores(whole)})
    return pd.DataFrame(rows)
