"""A device's cost model carried over from another device's table (the *prior*) by a few
measured programs: the prior already knows which nodes cost more than which, and a handful of
programs run on the new device say by how much its times differ.

:class:`TransferredModel` prices a query as the prior does, times ``2 ** offset``, the offset
being the new device's log2 ratio to the prior per (operator, input, output), shrunk towards its
operator's, shrunk towards the device's. The table around it (the shrink and expected errors
chosen by leaving models out) is :func:`costmodel.fit.transferred`'s; it keeps the new device's
own measured nodes, which win where they exist.
"""

import numpy as np

from costmodel.model import CostModel
from costmodel.queries import ANY, Query, node_queries


class TransferredModel(CostModel):
    """The ``prior`` table's price of a query times ``2 ** offset``; ``offsets`` maps
    (operator, input, output), (operator, ``*``, ``*``) and (``*``, ``*``, ``*``) to log2 ratios."""

    kind = "transfer"

    def __init__(self, prior, offsets: dict):
        self.prior, self.offsets = prior, offsets  # prior: a :class:`costmodel.table.CostTable`

    @classmethod
    def fit(cls, training, *, prior, shrink: float) -> "TransferredModel":
        """The new device's log2 ratios to ``prior`` from ``training`` (its measured nodes with
        their ratio to the prior: :func:`prior_ratios`), each group's pulled towards its parent
        group's with the weight of ``shrink`` nodes."""
        device = float(training.groupby("model")["log2_ratio"].median().median())
        operators = _shrunk(training, ["operator"], lambda _: device, shrink)
        pairs = _shrunk(training, ["operator", "input", "output"], lambda key: operators[key[0]], shrink)
        return cls(prior, {(ANY, ANY, ANY): device, **{(op, ANY, ANY): float(v) for op, v in operators.items()},
                           **{key: float(v) for key, v in pairs.items()}})

    def _offset(self, operator: str, input_name: str, output_name: str) -> float:
        return self.offsets.get((operator, input_name, output_name),
                                self.offsets.get((operator, ANY, ANY), self.offsets[(ANY, ANY, ANY)]))

    def node_offsets(self, frame) -> np.ndarray:
        """The offset of each measured node of ``frame``."""
        return np.array([self._offset(*key) for key in zip(frame["operator"], frame["input"], frame["output"])])

    def predict(self, queries: list[Query]):
        prior = np.array([price.ms for price in self.prior.price(queries)], dtype=float)
        return prior * np.exp2([self._offset(query.operator, query.input, query.output) for query in queries])

    @property
    def booster_text(self) -> str | None:
        """The trees this model's prices rest on (the prior's)."""
        return self.prior.model.booster_text

    def ready(self) -> None:
        self.prior.ready()

    def to_json(self) -> dict:
        return {"kind": self.kind, "prior": {**self.prior.to_json(), "digest": self.prior.digest},
                "offsets": [{"operator": op, "input": i, "output": o, "log2_ratio": ratio}
                            for (op, i, o), ratio in sorted(self.offsets.items())]}

    @classmethod
    def from_json(cls, data: dict, read_table=None) -> "TransferredModel":
        prior = dict(data["prior"])
        return cls(read_table(prior, prior.pop("digest")),
                   {(e["operator"], e["input"], e["output"]): float(e["log2_ratio"]) for e in data["offsets"]})


def prior_ratios(prior, measurements):
    """``measurements``' nodes, each with the ``prior`` table's price of it and log2 of its time over that."""
    nodes = measurements.nodes
    prior_ms = np.array([price.ms for price in prior.price(node_queries(nodes))])
    return nodes.assign(prior_ms=prior_ms, log2_ratio=np.log2(nodes["ms"].to_numpy() / prior_ms))


def _shrunk(ratios, by: list[str], parent, shrink: float):
    """Per group of ``ratios`` by ``by``: the median over its models of each one's median log2
    ratio, pulled towards ``parent(key)`` with the weight of ``shrink`` nodes."""
    per_model = ratios.groupby([*by, "model"])["log2_ratio"].median()
    center = per_model.groupby(level=list(range(len(by)))).median()
    count = ratios.groupby(by).size()
    parents = np.array([parent(key) for key in center.index], dtype=float)
    return (center * count + shrink * parents) / (count + shrink)
