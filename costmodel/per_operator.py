"""The cost model of tables made by hand (tests, a quick guess): a line per operator."""

from costmodel.queries import ANY, ELEMENT_BYTES, Query


class PerOperatorModel:
    """A fixed cost plus a cost per output element (per byte copied, for transitions) for each
    (operator, input, output), or for an operator in any representations (``*``, ``*``); queries
    it has no line for cost nothing. Tables made by hand (tests, a quick guess) use it."""

    kind = "per-operator"

    def __init__(self, lines: dict):
        self.lines = lines  # (operator, input, output) -> (fixed ms, ns per unit)

    def predict(self, queries: list[Query]):
        import math

        import numpy as np  # here, not at the top: the command line reads tables without numpy

        prices = []
        for query in queries:
            fixed, per_unit = (self.lines.get((query.operator, query.input, query.output))
                               or self.lines.get((query.operator, ANY, ANY), (0.0, 0.0)))
            shape = query.signature["outputs"][0] if query.signature["outputs"] else []
            element_bytes = ELEMENT_BYTES.get(query.signature.get("dtype"), 4) if query.transition else 1
            prices.append(fixed + per_unit * math.prod(shape) * element_bytes * 1e-6)
        return np.array(prices, dtype=float)

    def to_json(self) -> dict:
        return {"kind": self.kind, "lines": [{"operator": op, "input": i, "output": o, "fixed_ms": f, "ns_per_unit": n}
                                             for (op, i, o), (f, n) in sorted(self.lines.items())]}

    @classmethod
    def from_json(cls, data: dict) -> "PerOperatorModel":
        return cls({(e["operator"], e["input"], e["output"]): (float(e["fixed_ms"]), float(e["ns_per_unit"]))
                    for e in data["lines"]})
