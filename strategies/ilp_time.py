"""``ilp-time``: the assignment with the least predicted GPU time, solved with HiGHS."""

from executorch.backends.vulkan._passes.tag_memory_meta_pass import TagMemoryMetaPass

from strategies._registry import register_strategy
from strategies.ilp import IlpLayout, Solution, solve
from strategies.assignment import Assignment
from strategies.layout_problem import extract, nodes_inserted, remove_transitions
from strategies.objective import PredictedTime
from strategies.priced_layout import PricedLayout


@register_strategy("ilp-time")
class IlpTimeLayout(PricedLayout, IlpLayout):
    """The ILP with the predicted GPU time of the whole assignment as its objective: each
    operator node's time in the representations it reads and writes, plus each transition's,
    from the cost table it is constructed with (``--costs``), with what the table is unsure of priced
    against an anchor (ExecuTorch's own choices or the fewest transitions), which it keeps
    unless it saves more than the table's spread (:mod:`strategies.objective`). Without a
    table its records are skipped, saying how to get one."""

    objective = PredictedTime

    def solution_of(self, graph_module) -> Solution:
        inserted = nodes_inserted(lambda graph: TagMemoryMetaPass.call(self, graph), graph_module)  # ExecuTorch's own
        problem = extract(self, graph_module, inserted)
        reference = Assignment.read(problem, graph_module)
        remove_transitions(graph_module, inserted)
        return solve(self.objective(problem, self.table), self.time_limit_seconds, reference)

    @classmethod
    def summarize(cls, passes) -> dict:
        return {**super().summarize(passes), "anchors_kept": sum(p.solution.kept_anchor for p in passes)}
