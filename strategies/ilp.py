"""``ilp`` and ``ilp-bytes``: the proven optimum, solved with HiGHS over the ILP of
:mod:`strategies.ilp_model` (count of transitions, the bytes they write, or predicted GPU
time). A time limit returns the best feasible assignment, flagged as not proven optimal.
"""

import math
import time
from dataclasses import dataclass, replace

import executorch.backends.vulkan.utils as vk_utils
import highspy
from executorch.backends.vulkan._passes.tag_memory_meta_pass import TagMemoryMetaPass
from executorch.exir.pass_base import PassResult

from costmodel.pricing import Pricing
from layoutkit.errors import InvalidAssignmentError
from strategies._registry import register_strategy
from strategies.ilp_model import column_values, default_assignment, formulate
from strategies.layout_problem import (
    LayoutProblem,
    apply_assignment,
    extract,
    infeasible_operators,
    needed_transitions,
)
from strategies.time_objective import TimeObjective, cheapest, saves_beyond_spread

# "Optimal" for time: proven within this fraction of the optimum, far below what runs of one
# program differ by (0.2-0.45 % on an H100); closing the last gap of a float objective can take minutes.
TIME_RELATIVE_GAP = 1e-4


@dataclass
class Solution:
    tensor_reprs: dict
    use_reprs: list
    transitions: int
    cost: float
    bound: float
    optimal: bool
    solve_seconds: float
    variables: int
    constraints: int
    kept_anchor: bool = False  # ilp-time: its optimum saved no more than the table's spread


def _fewest_transitions(problem: LayoutProblem, time_limit: float) -> tuple[dict, list] | None:
    try:
        fewest = solve(problem, "count", time_limit)
    except InvalidAssignmentError:
        return None
    return fewest.tensor_reprs, fewest.use_reprs


def solve(problem: LayoutProblem, objective: str = "count", time_limit: float = 60.0,
          table: Pricing | None = None, reference: tuple[dict, list] | None = None) -> Solution:
    """The cheapest assignment of the problem, proven optimal unless the time limit hit; for
    ``time``, under ``table``, and with a ``reference`` (ExecuTorch's own choices) by the rule
    of :mod:`strategies.time_objective`: the optimum relative to an anchor, kept only where it
    saves more than the table's spread. HiGHS starts from the cheapest of the assignments at
    hand, so a time limit never returns worse than any of them."""
    start = time.perf_counter()
    if objective != "time":
        return _solve(problem, objective, time_limit, None, default_assignment(problem), start)
    fewest = _fewest_transitions(problem, time_limit)
    if reference is None:
        plain = TimeObjective(problem, table)
        return _solve(problem, objective, time_limit, plain,
                      cheapest(plain, [default_assignment(problem), fewest]), start)
    # The anchor: ExecuTorch's choices or the fewest transitions, whichever costs less with
    # the doubt over leaving ExecuTorch's charged (ties: ExecuTorch's).
    anchor = cheapest(TimeObjective(problem, table, reference), [reference, fewest])
    time_objective = TimeObjective(problem, table, anchor)
    solution = _solve(problem, objective, time_limit, time_objective,
                      cheapest(time_objective, [anchor, default_assignment(problem), fewest]), start)
    anchor_cost = time_objective.cost(*anchor)
    if saves_beyond_spread(anchor_cost, solution.cost, table.spread):
        return solution
    return replace(solution, tensor_reprs=anchor[0], use_reprs=anchor[1], cost=anchor_cost,
                   transitions=len(needed_transitions(problem, *anchor)), kept_anchor=True)


def _solve(problem: LayoutProblem, objective: str, time_limit: float, time_objective: TimeObjective | None,
           assignment: tuple[dict, list] | None, start: float) -> Solution:
    formulation = formulate(problem, objective, time_objective)
    model, x, y = formulation.model, formulation.x, formulation.y
    highs = model.solve(time_limit, column_values(problem, formulation, *assignment) if assignment else None,
                        TIME_RELATIVE_GAP if objective == "time" else 0.0)
    status = highs.getModelStatus()
    info = highs.getInfo()
    if info.primal_solution_status != highspy.kSolutionStatusFeasible:
        if status == highspy.HighsModelStatus.kTimeLimit:
            raise InvalidAssignmentError(
                f"ILP reached its {time_limit:g} s time limit before any feasible assignment; "
                "raise time_limit_seconds"
            )
        conflicting = infeasible_operators(problem) or ["(no single operator; a chain of sync rules)"]
        raise InvalidAssignmentError(
            f"ILP found no assignment ({highs.modelStatusToString(status)}); operators whose "
            f"constraints conflict: {', '.join(conflicting)}"
        )
    values = highs.getSolution().col_value

    def chosen(choices):
        return max(choices, key=lambda r: values[choices[r]])

    tensor_reprs = {key: chosen(choices) for key, choices in x.items()}
    use_reprs = [chosen(choices) for choices in y]
    needed = needed_transitions(problem, tensor_reprs, use_reprs)
    if time_objective:
        cost = time_objective.cost(tensor_reprs, use_reprs)
        bound = info.mip_dual_bound - formulation.tie_budget if math.isfinite(info.mip_dual_bound) else 0.0
    else:
        cost = sum(problem.transition_cost(s, r, objective) for s, r in needed)
        bound = _cost_bound(info.mip_dual_bound, formulation.tie_budget)
    return Solution(
        tensor_reprs=tensor_reprs,
        use_reprs=use_reprs,
        transitions=len(needed),
        cost=cost,
        bound=bound,
        optimal=status == highspy.HighsModelStatus.kOptimal,
        solve_seconds=time.perf_counter() - start,
        variables=formulation.variables,
        constraints=formulation.constraints,
    )


def _cost_bound(dual_bound: float, tie_budget: float) -> float:
    """A lower bound on the transition cost: HiGHS' bound less the tie-break's share, rounded
    up (costs are integers); 0 where HiGHS has no finite bound yet."""
    if not math.isfinite(dual_bound):
        return 0.0
    return float(max(0, math.ceil(dual_bound - tie_budget - 1e-6)))


def partition_problems(programs) -> list[LayoutProblem]:
    """The layout problem of each partition program (as the layout pass receives it) under
    the partitioner's default texture limits."""
    layout_pass = IlpLayout(vk_utils.DEFAULT_TEXTURE_LIMITS)
    return [extract(layout_pass, program.graph_module) for program in programs]


@register_strategy("ilp")
class IlpLayout(TagMemoryMetaPass):
    """One global assignment minimising the number of transitions, solved with HiGHS over the
    same OpRepSets the pass builds, then applied with the pass's own machinery (node
    representations set, clones inserted through ``set_arg_node_repr_or_transition`` and
    its transition cache). The clones inserted are checked to equal the solution's count.
    """

    objective = "count"
    time_limit_seconds = 60.0

    def call(self, graph_module):
        problem = extract(self, graph_module)
        self.solution = solution = solve(problem, self.objective, self.time_limit_seconds)
        apply_assignment(self, graph_module, problem, solution.tensor_reprs, solution.use_reprs)
        return PassResult(graph_module, True)

    @classmethod
    def summarize(cls, passes) -> dict:
        solutions = [p.solution for p in passes]
        return {
            "optimal": all(s.optimal for s in solutions),
            "objective": sum(s.cost for s in solutions),
            "bound": sum(s.bound for s in solutions),
            "solve_seconds": sum(s.solve_seconds for s in solutions),
            "variables": sum(s.variables for s in solutions),
            "constraints": sum(s.constraints for s in solutions),
        }


@register_strategy("ilp-bytes")
class IlpBytesLayout(IlpLayout):
    """The ILP with the bytes the transitions write as the objective (texture padding
    included), instead of their number."""

    objective = "bytes"
