"""The cost model of tables made by hand (tests, a quick guess): a line per operator."""

import math

from costmodel.model import CostModel
from costmodel.queries import ANY, ELEMENT_BYTES, Query, node_queries


class PerOperatorModel(CostModel):
    """A fixed cost plus a cost per output element (per byte copied, for transitions) for each
    (operator, input, output), or for an operator in any representations (``*``, ``*``); queries
    it has no line for cost nothing."""

    kind = "per-operator"

    def __init__(self, lines: dict):
        self.lines = lines  # (operator, input, output) -> (fixed ms, ns per unit)

    @classmethod
    def fit(cls, training) -> "PerOperatorModel":
        """A line per (operator, input, output) of ``training``, by least squares (a fixed cost
        alone where its nodes are all of one size)."""
        import numpy as np

        queries = node_queries(training)
        frame = training.assign(key=[(q.operator, q.input, q.output) for q in queries],
                                units=[_units(q) * 1e-6 for q in queries])
        lines = {}
        for key, group in frame.groupby("key", sort=False):
            units, ms = group["units"].to_numpy(), group["ms"].to_numpy()
            per_unit, fixed = np.polyfit(units, ms, 1) if np.ptp(units) > 0 else (0.0, ms.mean())
            lines[key] = (float(fixed), float(per_unit))
        return cls(lines)

    def predict(self, queries: list[Query]):
        import numpy as np  # here, not at the top: the command line reads tables without numpy

        prices = []
        for query in queries:
            fixed, per_unit = (self.lines.get((query.operator, query.input, query.output))
                               or self.lines.get((query.operator, ANY, ANY), (0.0, 0.0)))
            prices.append(fixed + per_unit * _units(query) * 1e-6)
        return np.array(prices, dtype=float)

    def to_json(self) -> dict:
        return {"kind": self.kind, "lines": [{"operator": op, "input": i, "output": o, "fixed_ms": f, "ns_per_unit": n}
                                             for (op, i, o), (f, n) in sorted(self.lines.items())]}

    @classmethod
    def from_json(cls, data: dict, read_table=None) -> "PerOperatorModel":
        return cls({(e["operator"], e["input"], e["output"]): (float(e["fixed_ms"]), float(e["ns_per_unit"]))
                    for e in data["lines"]})


def _units(query: Query) -> int:
    """What a line's cost per unit counts: the output's elements, or for a transition the bytes it copies."""
    shape = query.signature["outputs"][0] if query.signature["outputs"] else []
    element_bytes = ELEMENT_BYTES.get(query.signature.get("dtype"), 4) if query.transition else 1
    return math.prod(shape) * element_bytes
