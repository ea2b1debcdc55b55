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

    predictions, problems = {}, []
    for number, strategy in enumerate(strategies, 1):
        print(f"[{number}/{len(strategies)}] lowering {model} with {strategy} under {table.name}", file=sys.stderr)
        found = assignments(lowered_program(model, strategy, table))
        predictions[strategy] = sum((assignment.prediction(table) for assignment in found), Prediction())
        problems = problems or [assignment.problem for assignment in found]
    return PricedPrograms(predictions, problems)


def top_up_plan(problems: list, table: CostTable) -> tuple[int, int, int]:
    """The top-up rounds that add coverage (every partition's first rounds to, that many
    programs), the pairs outside ``table``'s support they cover and how many there are."""
    from strategies.calibration import outside_pairs, pairs_covered_per_round

    per_partition = [pairs_covered_per_round(problem, table) for problem in problems]
    return (max(map(len, per_partition), default=0), sum(map(sum, per_partition)),
            sum(len(outside_pairs(problem, table)) for problem in problems))
