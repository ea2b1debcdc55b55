"""Which of a prior's programs teach the most about a new device for their cost.

A node teaches where the prior's corpus spends time (the corpus stands in for the catalog: its
models were chosen to cover the catalog's operators) and where the prior is unsure: each
(operator, input, output, time scale) is worth the square root of its share of the corpus's
measured time, times one plus the prior's expected error of the operator. A program's gain is
what its nodes add to each one's coverage, with diminishing returns (the square root of the
nodes covered); its cost is its size (its nodes over the median program's: lowering time grows
with them), times 1 + :data:`MODEL_COST` where its model is not chosen yet. Greedy by gain per
cost (:func:`choose_programs`).
"""

import math
from collections import Counter

import numpy as np
import pandas as pd

from costmodel.measurements import Measurements
from costmodel.table import UNSEEN_OPERATOR_ERROR, CostTable

# A program whose model is not chosen yet costs its lowering prefix too, in programs' worth. 0:
# a device's ratio to the prior differs from model to model, so a new model teaches more than
# another program of one chosen (lavapipe, 10 programs: 5 models, median error 32 %; at 2,
# 2 models and 63 %), and a program's size already prices its lowering.
MODEL_COST = 0.0
PROGRAM = ["model", "strategy"]


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
