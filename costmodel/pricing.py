"""What prices a layout problem for the ILP and the local searches: :class:`Pricing`."""

from typing import Protocol

from costmodel.queries import Price, Query


class Pricing(Protocol):
    """A device's cost table (:class:`costmodel.table.CostTable`), or what else prices
    queries (the novelty a calibration round seeks). A problem keeps its prices per ``digest``;
    a time objective leaves its anchor only for a saving above ``spread`` (relative)."""

    digest: str
    spread: float

    def price(self, queries: list[Query]) -> list[Price]:
        """Each query's price, in the order asked."""
        ...
