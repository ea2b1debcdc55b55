"""What a cost table predicts of an assignment: its time (ms), the part measured on these very
nodes, the fitted rest per operator with the relative error expected of it, and that error as
records state it (``predicted_error_expected``)."""

import math
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Prediction:
    """An assignment's predicted time (ms): in all, the part measured on these very nodes,
    and the fitted rest per operator with the relative error expected of it."""

    ms: float = 0.0
    measured_ms: float = 0.0
    fitted: dict = field(default_factory=dict)  # operator -> (fitted ms, relative error expected)
    by_operator: dict = field(default_factory=dict)  # operator ("transition" for clones) -> ms

    @classmethod
    def of(cls, priced) -> "Prediction":
        """The prediction of nodes priced as (operator, :class:`Price`) pairs."""
        total = measured = 0.0
        fitted: dict = {}
        by_operator: dict = {}
        for operator, price in priced:
            total += price.ms
            by_operator[operator] = by_operator.get(operator, 0.0) + price.ms
            if price.measured:
                measured += price.ms
            else:
                fitted[operator] = (fitted.get(operator, (0.0, 0.0))[0] + price.ms, price.error)
        return cls(total, measured, fitted, by_operator)

    @property
    def error_ms(self) -> float:
        """The error expected of the whole: an operator's nodes err together (one fit, alike
        shapes), different operators independently. Each operator's error is the median of its
        error over models left out of the fit, so the whole is a median too: leaving one model
        out, realized error lay within it for about half of the models (docs/gpu-time.md)."""
        return math.sqrt(sum((ms * error) ** 2 for ms, error in self.fitted.values()))

    @property
    def expected_error(self) -> float | None:
        """:attr:`error_ms` relative to the whole (a record's ``predicted_error_expected``); None
        where it predicts no time."""
        return self.error_ms / self.ms if self.ms else None

    def __add__(self, other: "Prediction") -> "Prediction":
        fitted = dict(self.fitted)
        for operator, (ms, error) in other.fitted.items():
            fitted[operator] = (fitted.get(operator, (0.0, error))[0] + ms, error)
        by_operator = dict(self.by_operator)
        for operator, ms in other.by_operator.items():
            by_operator[operator] = by_operator.get(operator, 0.0) + ms
        return Prediction(self.ms + other.ms, self.measured_ms + other.measured_ms, fitted, by_operator)
