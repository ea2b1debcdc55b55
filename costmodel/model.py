"""What every model a cost table holds is (:class:`CostModel`): it fits itself, prices
queries, and is written to and read from the table's file under its kind."""

from abc import ABC, abstractmethod


class CostModel(ABC):
    """A device's model of what a node costs, as TVM's cost models are: one kind each
    (:mod:`costmodel.per_operator`, :mod:`costmodel.gradient_boosted`,
    :mod:`costmodel.transferred`), each owning its fit and its prediction. The table holding
    it (:class:`costmodel.table.CostTable`) prices with it where it measured no node itself."""

    kind: str  # the name a table's file gives the model
    # The LightGBM trees its prices rest on, which a run builds (and checks) before it starts; None: none.
    booster_text: str | None = None

    @classmethod
    @abstractmethod
    def fit(cls, training, **options) -> "CostModel":
        """The model of ``training`` (a frame of measured nodes, one row each, its time in ``ms``);
        ``options``: what the kind's fit needs besides."""

    @abstractmethod
    def predict(self, queries: list) -> "numpy.ndarray":
        """Each :class:`costmodel.queries.Query`'s fitted time (ms), in the order asked."""

    def ready(self) -> None:
        """Build what pricing needs now, so that no strategy's pass time pays for it (nothing, unless
        a kind builds something)."""

    @abstractmethod
    def to_json(self) -> dict:
        """The model as its table's file holds it, its ``kind`` included."""

    @classmethod
    @abstractmethod
    def from_json(cls, data: dict, read_table=None) -> "CostModel":
        """The model of :meth:`to_json`'s ``data``; ``read_table(data, digest)`` reads a table the
        model rests on (a transfer's prior) from its JSON."""
