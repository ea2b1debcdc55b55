"""Error bars that hold at the level they name: split conformal intervals from held-out residuals.

A table's fit leaves models out (:mod:`costmodel.fit`'s folds) and predicts them; each
held-out program's residual is ``log(measured / predicted)``. Split conformal prediction (Lei
et al., "Distribution-free predictive inference for regression", 2018) makes an interval of
level L from n such residuals: a new program's residual lies between the
``floor((n + 1)(1 - L) / 2)``-th and the ``ceil((n + 1)(1 + L) / 2)``-th smallest with
probability at least L, when the new model is exchangeable with the held-out ones. Three
sets of residuals, each its own interval:

- **program**: a program's time over the nodes inside the table's support
  (:mod:`costmodel.support`): what the fit interpolates;
- **change**: a program's time relative to the reference strategy's on the same model (the
  change a layout decision rests on; the errors the two programs share cancel);
- **family worst**: per kernel family, the largest ``|residual|`` of a held-out model's nodes
  of that family, summed per model. Nodes outside the support are stated within their family's
  worst (the pooled worst for a family never held out): an extrapolation is never stated
  tighter than what the fit was seen to miss by.
"""

import math
from dataclasses import dataclass

import numpy as np

LEVEL = 0.8


@dataclass(frozen=True)
class Bounds:
    """A residual's interval, as log(measured / predicted)."""

    low: float
    high: float

    @classmethod
    def conformal(cls, residuals, level: float = LEVEL) -> "Bounds":
        """The split conformal interval of level ``level`` from held-out ``residuals``; with
        too few of them for that level, their whole range (said by :attr:`Intervals.held_out`)."""
        ordered = np.sort(np.asarray(residuals, dtype=float))
        count = len(ordered)
        if not count:
            return cls(0.0, 0.0)
        low_rank = math.floor((count + 1) * (1 - level) / 2)
        high_rank = math.ceil((count + 1) * (1 + level) / 2)
        return cls(float(ordered[max(low_rank, 1) - 1]), float(ordered[min(high_rank, count) - 1]))

    def of(self, ms: float) -> tuple[float, float]:
        return ms * math.exp(self.low), ms * math.exp(self.high)

    def to_json(self) -> list:
        return [self.low, self.high]


@dataclass(frozen=True)
class Intervals:
    """A table's intervals at ``level``: for the time inside its support, for a change against
    the reference strategy, and per family the worst held out (the pooled worst beside it)."""

    level: float
    program: Bounds
    change: Bounds
    family_worst: dict  # family -> largest |log(measured / predicted)| of a held-out model's nodes
    pooled_worst: float
    held_out: dict  # residuals behind each: {"programs": n, "changes": n, "families": n}

    @classmethod
    def of(cls, programs, changes, family_residuals: dict, level: float = LEVEL) -> "Intervals":
        """From held-out residuals: of programs (inside the support), of changes, and per family."""
        worst = {family: float(np.max(np.abs(r))) for family, r in family_residuals.items() if len(r)}
        return cls(level, Bounds.conformal(programs, level), Bounds.conformal(changes, level), worst,
                   max(worst.values(), default=0.0),
                   {"programs": len(programs), "changes": len(changes), "families": len(worst)})

    def interval(self, inside_ms: float, outside_ms: dict) -> tuple[float, float]:
        """The interval of a prediction of ``inside_ms`` inside the support and, per family,
        ``outside_ms`` outside it."""
        low, high = self.program.of(inside_ms)
        for family, ms in outside_ms.items():
            worst = self.family_worst.get(family, self.pooled_worst)
            low, high = low + ms * math.exp(-worst), high + ms * math.exp(worst)
        return low, high

    def to_json(self) -> dict:
        return {"level": self.level, "program": self.program.to_json(), "change": self.change.to_json(),
                "family_worst": dict(sorted(self.family_worst.items())), "pooled_worst": self.pooled_worst,
                "held_out": self.held_out}

    @classmethod
    def from_json(cls, data: dict) -> "Intervals":
        return cls(data["level"], Bounds(*data["program"]), Bounds(*data["change"]), dict(data["family_worst"]),
                   data["pooled_worst"], dict(data["held_out"]))
