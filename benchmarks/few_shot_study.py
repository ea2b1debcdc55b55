"""The few-shot study (docs/new-device.md): how well a new device's table, transferred from
another device's (the prior) with a budget of programs, predicts the models the budget left
out. A device that measured a whole corpus stands in for the new one: for each budget, the
programs are chosen among those it measured, and the table they give is scored on its
programs of the other models, beside the prior as it is and scaled by one factor, the
budget's programs fitted alone, and the device's whole table with each model left out.

    python -m benchmarks.few_shot_study --prior docs/cost-table/h100.json \\
        --held-out docs/cost-table/lavapipe-nodes.jsonl.gz --out study

writes ``study/study.csv``: a row per budget (empty: every program, each model left out) and
method, with :func:`scores`' columns.
"""

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from costmodel.fit import fit, transferred
from costmodel.measurements import Measurements, read_measurements
from costmodel.program_choice import PROGRAM, choose_programs
from costmodel.queries import ANY
from costmodel.table import CostTable
from costmodel.transferred import TransferredModel, prior_ratios
from harness.inspection import validation
from layoutkit.errors import UsageError
from models import FP16_SUFFIX

BUDGETS = (5, 10, 20, 40)
NAME = "few_shot_study"


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


def one_factor(prior: CostTable, measurements: Measurements, ratios: pd.DataFrame) -> CostTable:
    """The prior, every price times the one factor that makes its programs' total time the
    measured total (``ratios``: :func:`prior_ratios` of measurements ``measurements`` are part of)."""
    factor = measurements.programs["process_ms"].map(np.median).sum() / ratios.loc[measurements.nodes.index,
                                                                                   "prior_ms"].sum()
    return CostTable(measurements.device, TransferredModel(prior, {(ANY, ANY, ANY): math.log2(factor)}),
                     errors=prior.errors, probes=prior.probes, spread=prior.spread).identified()


def _of_programs(measurements: Measurements, programs: list) -> Measurements:
    """The part of ``measurements`` of the (model, strategy) ``programs``."""
    def kept(frame):
        return frame[pd.MultiIndex.from_frame(frame[PROGRAM]).isin(programs)]

    return Measurements(measurements.device, kept(measurements.nodes), kept(measurements.programs),
                        measurements.limits)


def study(prior: CostTable, candidates: Measurements, held_out: Measurements, budgets=BUDGETS,
          progress=lambda message: None) -> pd.DataFrame:
    """Per budget and method, :func:`scores` on ``held_out``'s programs of the models the
    budget's programs left out (see the module); budget ``None``: the whole of ``held_out``,
    each model left out in turn."""
    models = sorted(held_out.programs["model"].unique())
    progress(f"the whole table of {held_out.device} without each of {len(models)} models")
    whole = validation.left_out_programs(held_out, lambda kept: fit(kept, folds=1), models)
    # a program computed in half precision is chosen as the prior's program of its model
    measured = {(model.removesuffix(FP16_SUFFIX), strategy): (model, strategy)
                for model, strategy in held_out.programs[PROGRAM].itertuples(index=False, name=None)}
    ratios = prior_ratios(prior, held_out)  # priced once: every fit below takes its part
    rows = []
    for budget in budgets:
        chosen = choose_programs(candidates, prior, budget, among=list(measured))
        programs = [measured[program] for program in chosen[PROGRAM].itertuples(index=False, name=None)]
        fitted = _of_programs(held_out, programs)
        scored = [m for m in models if m not in {model for model, _ in programs}]
        progress(f"{budget} programs of {len(models) - len(scored)} models, scored on {len(scored)}")
        own = held_out.of_models(scored)
        for method, table in (("few-shot", transferred(prior, fitted, ratios)),
                              ("prior, one factor", one_factor(prior, fitted, ratios)),
                              ("budget alone", fit(fitted, folds=1)), ("prior as it is", prior)):
            rows.append({"budget": budget, "method": method, **scores(validation.predicted_programs(own, table))})
        rows.append({"budget": budget, "method": "whole table, model left out",
                     **scores(whole[whole["model"].isin(scored)])})
    progress(f"every program, each of {len(models)} models left out")
    for method, fit_kept in (("few-shot", lambda kept: transferred(prior, kept, ratios)),
                             ("prior, one factor", lambda kept: one_factor(prior, kept, ratios))):
        rows.append({"budget": None, "method": method, **scores(validation.left_out_programs(held_out, fit_kept,
                                                                                            models))})
    rows.append({"budget": None, "method": "prior as it is", **scores(validation.predicted_programs(held_out, prior))})
    rows.append({"budget": None, "method": "whole table, model left out", **scores(whole)})
    return pd.DataFrame(rows)


def main(argv=None) -> int:
    from harness.commands.fitting import read_prior
    from harness.results.table import format_number

    parser = argparse.ArgumentParser(prog=f"python -m benchmarks.{NAME}", description=__doc__.split("\n\n")[0])
    parser.add_argument("--prior", required=True, metavar="TABLE", help="the prior's table, its kept nodes beside it "
                        "(NAME-nodes.jsonl.gz)")
    parser.add_argument("--held-out", required=True, metavar="NODES", help="kept nodes of a device that measured a "
                        "whole corpus (calibrate --nodes)")
    parser.add_argument("--out", required=True, help="the folder study.csv is written to")
    parser.add_argument("--budget", type=int, action="append", dest="budgets", help="a budget of programs to study "
                        f"(several: each; default {', '.join(map(str, BUDGETS))})")
    args = parser.parse_args(argv)
    started = time.monotonic()
    try:
        prior, candidates = read_prior(args.prior)
        results = study(prior, candidates, read_measurements(args.held_out), args.budgets or BUDGETS,
                        progress=lambda what: print(f"{NAME}: [{time.monotonic() - started:.0f} s] {what}",
                                                    file=sys.stderr))
    except UsageError as error:
        print(f"{NAME}: {error}", file=sys.stderr)
        return 2
    path = Path(args.out) / "study.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    results.to_csv(path, index=False)
    print(results.to_string(index=False, float_format=format_number, na_rep="all"))
    print(f"{NAME}: written to {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
