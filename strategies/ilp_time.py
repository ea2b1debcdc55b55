"""``ilp-time``: the assignment with the least predicted GPU time, solved with HiGHS."""

from strategies._registry import register_strategy
from strategies.gpu_costs import CostTable, required_table
from strategies.ilp import IlpLayout


@register_strategy("ilp-time")
class IlpTimeLayout(IlpLayout):
    """The ILP with the predicted GPU time of the whole assignment as its objective: each
    operator node's time in the representations it reads and writes, plus each transition's,
    from the cost table in force (``$LAYOUTBENCH_COSTS``, set by ``--costs``). Without a table
    its records are skipped, saying how to get one."""

    objective = "time"

    @staticmethod
    def check_available() -> None:
        """No table, no ilp-time: a sweep skips its records before it lowers anything."""
        required_table()

    def cost_table(self) -> CostTable:
        return required_table()
