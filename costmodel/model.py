"""What every model a cost table holds is (:class:`CostModel`)."""

from abc import ABC, abstractmethod


class CostModel(ABC):
    """A device's model of what a node costs, as TVM's cost models are: each kind
    (:mod:`costmodel.per_operator`, :mod:`costmodel.gradient_boosted`,
    :mod:`costmodel.transferred`) owns its fit and its prediction, and is written to and read
    from its table's file under its ``kind``."""

    kind: str
    booster_text: str | None = None  # LightGBM trees its prices rest on: a run builds and checks them first

    @classmethod
    @abstractmethod
    def fit(cls, training, **options) -> "CostModel":
        """The model of ``training`` (measured nodes, a row each, its time in ``ms``)."""

    @abstractmethod
    def predict(self, queries: list) -> "numpy.ndarray":
        """Each :class:`costmodel.queries.Query`'s fitted time (ms), in the order asked."""

    def ready(self) -> None:
        """Build what pricing needs now, so that no strategy's pass time pays for it."""

    @abstractmethod
    def to_json(self) -> dict:
        """The model as its table's file holds it, its ``kind`` included."""

    @classmethod
    @abstractmethod
    def from_json(cls, data: dict, read_table=None) -> "CostModel":
        """The model of :meth:`to_json`'s ``data``; ``read_table(data, digest)`` reads a table it
        rests on (a transfer's prior)."""
