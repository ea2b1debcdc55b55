"""A model's programs priced under a device's cost table (what each predicts, how much of it
lies outside the table's support, its interval), and the top-up rounds
(:mod:`strategies.calibration`'s ``calibration-top-up-N``) that cover what lies outside:
``calibrate --top-up``'s before, plan and after."""

import sys
from dataclasses import dataclass

import pandas as pd

from costmodel.prediction import Prediction
from costmodel.table import CostTable
from harness.inspection.kernel_coverage import lowered_program


@dataclass(frozen=True)
class PricedPrograms:
    """Per strategy, the prediction of the model's program; the layout problems of its partitions."""

    predictions: dict  # strategy -> Prediction
    problems: list
    used: dict  # graph -> the (node, input, output) pairs the programs hold

    def outside(self) -> dict:
        """Per kernel family, the most any program predicts of it outside the support (ms)."""
        families: dict = {}
        for prediction in self.predictions.values():
            for family, ms in prediction.outside.items():
                families[family] = max(families.get(family, 0.0), ms)
        return families

    def summary(self, table: CostTable) -> pd.DataFrame:
        """A row per program: its predicted ms, interval, nodes and share outside the support."""
        rows = []
        for strategy, prediction in self.predictions.items():
            low, high = prediction.interval(table.intervals) if table.intervals else (None, None)
            rows.append({"strategy": strategy, "predicted_ms": prediction.ms, "low_ms": low, "high_ms": high,
                         "outside_nodes": prediction.outside_nodes,
                         "outside_share": prediction.outside_ms / prediction.ms if prediction.ms else 0.0})
        return pd.DataFrame(rows)


def priced_programs(model: str, strategies: list[str], table: CostTable) -> PricedPrograms:
    """``model`` lowered with each of ``strategies`` and priced under ``table``, with progress on stderr."""
    from harness.targets.vulkan.compile.metrics import assignments
    from strategies.calibration import pairs_of

    predictions, problems, used = {}, [], {}
    for number, strategy in enumerate(strategies, 1):
        print(f"[{number}/{len(strategies)}] lowering {model} with {strategy} under {table.name}", file=sys.stderr)
        found = assignments(lowered_program(model, strategy, table))
        predictions[strategy] = sum((assignment.prediction(table) for assignment in found), Prediction())
        problems = problems or [assignment.problem for assignment in found]
        for assignment in found:
            used.setdefault(assignment.problem.graph, set()).update(pairs_of(assignment))
    return PricedPrograms(predictions, problems, used)


@dataclass(frozen=True)
class TopUpPlan:
    """The top-up rounds that add coverage (a program each), the pairs outside the support they
    cover of how many there are, and of those the compared programs hold."""

    rounds: int
    covered: int
    outside: int
    used_covered: int
    used: int


def top_up_plan(programs: PricedPrograms, table: CostTable) -> TopUpPlan:
    from strategies.calibration import outside_pairs, pairs_covered_per_round, top_up_rounds

    rounds = covered = outside = used_covered = used = 0
    for problem in programs.problems:
        per_round, targets = pairs_covered_per_round(problem, table), outside_pairs(problem, table)
        held = programs.used.get(problem.graph, set()) & targets
        rounds, covered, outside = max(rounds, len(per_round)), covered + sum(per_round), outside + len(targets)
        used_covered += len(held & top_up_rounds(problem, table).coverage.covered)
        used += len(held)
    return TopUpPlan(rounds, covered, outside, used_covered, used)
