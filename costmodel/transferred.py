"""A device's cost model carried over from another device's table by a few measured programs.

A new GPU's table need not be fitted from a whole corpus: an existing device's table (the
*prior*) already knows which nodes cost more than which, and a handful of programs run on the
new device say by how much its times differ. :class:`TransferredModel` prices a query as the
prior does, times ``2 ** offset``, the offset being the new device's log2 ratio to the prior,
fitted per (operator, input, output), shrunk towards its operator's, shrunk towards the
device's (``harness.inspection.few_shot`` fits it). The table holding it keeps the new
device's own measured nodes, which win where they exist (:meth:`costmodel.table.CostTable.price`).
"""

from costmodel.queries import ANY, Query
from costmodel.table import CostTable


class TransferredModel:
    """The ``prior`` table's price of a query times ``2 ** offset``; ``offsets`` maps
    (operator, input, output), (operator, ``*``, ``*``) and (``*``, ``*``, ``*``) to log2 ratios."""

    kind = "transfer"

    def __init__(self, prior: CostTable, offsets: dict):
        self.prior, self.offsets = prior, offsets

    def offset(self, query: Query) -> float:
        return self.offsets.get((query.operator, query.input, query.output),
                                self.offsets.get((query.operator, ANY, ANY), self.offsets[(ANY, ANY, ANY)]))

    def predict(self, queries: list[Query]):
        import numpy as np

        prior = np.array([price.ms for price in self.prior.price(queries)], dtype=float)
        return prior * np.exp2([self.offset(query) for query in queries])

    @property
    def booster_text(self) -> str | None:
        """The trees this model's prices rest on (the prior's), which a run builds before it starts."""
        return getattr(self.prior.model, "booster_text", None)

    def ready(self) -> None:
        self.prior.ready()

    def to_json(self) -> dict:
        return {"kind": self.kind, "prior": {**self.prior.to_json(), "digest": self.prior.digest},
                "offsets": [{"operator": op, "input": i, "output": o, "log2_ratio": ratio}
                            for (op, i, o), ratio in sorted(self.offsets.items())]}

    @classmethod
    def from_json(cls, data: dict) -> "TransferredModel":
        prior = dict(data["prior"])
        return cls(CostTable.from_json(prior, prior.pop("digest")),
                   {(e["operator"], e["input"], e["output"]): float(e["log2_ratio"]) for e in data["offsets"]})
