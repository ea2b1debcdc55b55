"""What a cost table predicts of an assignment (:class:`Prediction`), and the interval it states
of it (:mod:`costmodel.intervals`)."""

from dataclasses import dataclass, field

from costmodel.intervals import Intervals
from costmodel.queries import Price, Query
from costmodel.support import Support


@dataclass(frozen=True)
class Prediction:
    """An assignment's predicted time (ms): in all, the part measured on these very nodes, per
    operator, and per kernel family the fitted part outside the table's support
    (:mod:`costmodel.support`)."""

    ms: float = 0.0
    measured_ms: float = 0.0
    by_operator: dict = field(default_factory=dict)  # operator ("transition" for clones) -> ms
    outside: dict = field(default_factory=dict)  # kernel family -> fitted ms outside the support
    outside_nodes: int = 0  # nodes and transitions priced outside the support

    @classmethod
    def of(cls, queries: list[Query], prices: list[Price], support: Support | None = None) -> "Prediction":
        """The prediction of ``queries`` priced ``prices``; with the table's ``support``, its
        fitted nodes outside it."""
        total = measured = 0.0
        by_operator: dict = {}
        outside: dict = {}
        outside_nodes = 0
        for query, price in zip(queries, prices):
            total += price.ms
            by_operator[query.operator] = by_operator.get(query.operator, 0.0) + price.ms
            if price.measured:
                measured += price.ms
            elif support is not None:
                family, why = support.place(query)
                if why:
                    outside[family] = outside.get(family, 0.0) + price.ms
                    outside_nodes += 1
        return cls(total, measured, by_operator, outside, outside_nodes)

    @property
    def outside_ms(self) -> float:
        return sum(self.outside.values())

    def interval(self, intervals: Intervals) -> tuple[float, float]:
        """The interval ``intervals`` states of it: the part inside the support (measured nodes
        among it) by the programs' held-out residuals, the rest by each family's worst."""
        return intervals.interval(self.ms - self.outside_ms, self.outside)

    def __add__(self, other: "Prediction") -> "Prediction":
        def summed(first: dict, second: dict) -> dict:
            return {key: first.get(key, 0.0) + second.get(key, 0.0) for key in {**first, **second}}

        return Prediction(self.ms + other.ms, self.measured_ms + other.measured_ms,
                          summed(self.by_operator, other.by_operator), summed(self.outside, other.outside),
                          self.outside_nodes + other.outside_nodes)
