"""A layout pass that prices its choices with a device's cost table, handed to its constructor."""

from costmodel.table import NO_TABLE, CostTable
from layoutkit.errors import UnavailableError


class PricedLayout:
    """Mixin (before the pass class) for a strategy that needs a cost table: the harness
    constructs the pass with ``costs=TABLE``; nothing else gives it one. ExecuTorch's own
    pipeline constructs the pass without a table, so :attr:`table` then says how to get one."""

    def __init__(self, *args, costs: CostTable | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.costs = costs

    @property
    def table(self) -> CostTable:
        if self.costs is None:
            raise UnavailableError(NO_TABLE)
        return self.costs


def construct(layout_pass_cls: type, args: tuple, kwargs: dict, costs: CostTable | None):
    """The layout pass as ExecuTorch constructs it (``args``, ``kwargs``), with ``costs`` where
    it prices its choices."""
    if issubclass(layout_pass_cls, PricedLayout):
        return layout_pass_cls(*args, costs=costs, **kwargs)
    return layout_pass_cls(*args, **kwargs)
