"""``ilp`` and ``ilp-bytes``: the proven optimum, solved with HiGHS over the ILP of
:mod:`strategies.ilp_model` for an :mod:`objective <strategies.objective>` (count of transitions,
the bytes they write, or predicted GPU time). A time limit returns the best feasible
assignment, flagged as not proven optimal.
"""

import math
import time
from dataclasses import dataclass, replace

import executorch.backends.vulkan.utils as vk_utils
import highspy
from executorch.backends.vulkan._passes.tag_memory_meta_pass import TagMemoryMetaPass
from executorch.exir.pass_base import PassResult

from layoutkit.errors import InvalidAssignmentError
from strategies._registry import register_strategy
from strategies.assignment import Assignment
from strategies.ilp_model import column_values, default_assignment, formulate
from strategies.layout_problem import LayoutProblem, extract, infeasible_operators
from strategies.objective import Objective, TransitionBytes, TransitionCount

# "Optimal" for time: proven within this fraction of the optimum, far below what runs of one
# program differ by (0.2-0.45 % on an H100); closing the last gap of a float objective can take minutes.
TIME_RELATIVE_GAP = 1e-4


@dataclass
class Solution:
    assignment: Assignment
    cost: float
    bound: float
    optimal: bool
    solve_seconds: float
    variables: int
    constraints: int
    kept_anchor: bool = False  # ilp-time: its optimum saved no more than the table's spread


def _fewest_transitions(problem: LayoutProblem, time_limit: float) -> Assignment | None:
    try:
        return solve(TransitionCount(problem), time_limit).assignment
    except InvalidAssignmentError:
        return None


def solve(objective: Objective, time_limit: float = 60.0, reference: Assignment | None = None) -> Solution:
    """The assignment of the objective's problem that costs least, proven optimal unless the
    time limit hit. HiGHS starts from the cheapest of the assignments at hand, so a time limit
    never returns worse than any of them: an integral objective's proof is quick, and it
    starts from the default assignment; any other's search stops at a relative gap, and it
    starts from the cheaper of that and the fewest transitions. With a ``reference``
    (ExecuTorch's own choices), by the rule of :mod:`strategies.objective`: the optimum
    relative to an anchor, kept only where it saves more than the objective's spread."""
    start = time.perf_counter()
    problem = objective.problem
    if objective.integral:
        return _solve(objective, time_limit, default_assignment(problem), start)
    fewest = _fewest_transitions(problem, time_limit)
    if reference is None:
        return _solve(objective, time_limit, objective.cheapest([default_assignment(problem), fewest]), start)
    # The anchor: ExecuTorch's choices or the fewest transitions, whichever costs less with
    # the doubt over leaving ExecuTorch's charged (ties: ExecuTorch's).
    anchor = objective.relative_to(reference).cheapest([reference, fewest])
    anchored = objective.relative_to(anchor)
    solution = _solve(anchored, time_limit, anchored.cheapest([anchor, default_assignment(problem), fewest]), start)
    anchor_cost = anchored.cost(anchor)
    if objective.saves_beyond_spread(anchor_cost, solution.cost):
        return solution
    return replace(solution, assignment=anchor, cost=anchor_cost, kept_anchor=True)


def _solve(objective: Objective, time_limit: float, assignment: Assignment | None, start: float) -> Solution:
    problem = objective.problem
    formulation = formulate(objective)
    model, x, y = formulation.model, formulation.x, formulation.y
    highs = model.solve(time_limit, column_values(formulation, assignment) if assignment else None,
                        0.0 if objective.integral else TIME_RELATIVE_GAP)
    status = highs.getModelStatus()
    info = highs.getInfo()
    if info.primal_solution_status != highspy.kSolutionStatusFeasible:
        if status == highspy.HighsModelStatus.kTimeLimit:
            raise InvalidAssignmentError(f"ILP reached its {time_limit:g} s time limit before any feasible "
                                         "assignment; raise time_limit_seconds")
        conflicting = infeasible_operators(problem) or ["(no single operator; a chain of sync rules)"]
        raise InvalidAssignmentError(f"ILP found no assignment ({highs.modelStatusToString(status)}); operators "
                                     f"whose constraints conflict: {', '.join(conflicting)}")
    values = highs.getSolution().col_value

    def chosen(choices):
        return max(choices, key=lambda r: values[choices[r]])

    found = Assignment(problem, {key: chosen(choices) for key, choices in x.items()}, [chosen(c) for c in y])
    return Solution(
        assignment=found,
        cost=objective.cost(found),
        bound=_cost_bound(objective, info.mip_dual_bound, formulation.tie_budget),
        optimal=status == highspy.HighsModelStatus.kOptimal,
        solve_seconds=time.perf_counter() - start,
        variables=formulation.variables,
        constraints=formulation.constraints,
    )


def _cost_bound(objective: Objective, dual_bound: float, tie_budget: float) -> float:
    """A lower bound on the cost: HiGHS' bound less the tie-break's share, rounded up where
    costs are integers; 0 where HiGHS has no finite bound yet."""
    if not math.isfinite(dual_bound):
        return 0.0
    return float(max(0, math.ceil(dual_bound - tie_budget - 1e-6))) if objective.integral else dual_bound - tie_budget


def partition_problems(programs) -> list[LayoutProblem]:
    """The layout problem of each partition program (as the layout pass receives it) under
    the partitioner's default texture limits."""
    layout_pass = IlpLayout(vk_utils.DEFAULT_TEXTURE_LIMITS)
    return [extract(layout_pass, program.graph_module) for program in programs]


@register_strategy("ilp")
class IlpLayout(TagMemoryMetaPass):
    """One global assignment minimising the number of transitions, solved with HiGHS over the
    same OpRepSets the pass builds, then applied with the pass's own machinery
    (:meth:`Assignment.apply <strategies.assignment.Assignment.apply>`, which checks the clones
    it inserts against the solution's)."""

    objective = TransitionCount  # what it minimises, made per problem
    time_limit_seconds = 60.0

    def call(self, graph_module):
        self.solution = self.solution_of(graph_module)
        self.solution.assignment.apply(self, graph_module)
        return PassResult(graph_module, True)

    def solution_of(self, graph_module) -> Solution:
        """The assignment to apply to ``graph_module``, with how it was found."""
        return solve(self.objective(extract(self, graph_module)), self.time_limit_seconds)

    @classmethod
    def summarize(cls, passes) -> dict:
        solutions = [p.solution for p in passes]
        return {"optimal": all(s.optimal for s in solutions), "objective": sum(s.cost for s in solutions),
                **{name: sum(getattr(s, name) for s in solutions)
                   for name in ("bound", "solve_seconds", "variables", "constraints")}}


@register_strategy("ilp-bytes")
class IlpBytesLayout(IlpLayout):
    """The ILP with the bytes the transitions write as the objective (texture padding
    included), instead of their number."""

    objective = TransitionBytes
