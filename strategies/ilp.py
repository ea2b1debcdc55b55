"""``ilp`` and ``ilp-bytes``: the proven optimum, solved with HiGHS.

Formulation over a :class:`~strategies.layout_problem.LayoutProblem`:

- ``x[t, r]`` (binary): tensor ``t`` is stored as ``r``; one per tensor.
- ``y[u, r]`` (binary): use ``u`` (an operator argument) reads ``r``; one per use.
- ``w[g, p]`` (binary): sync group ``g`` has packed-dim info ``p``; each member's
  representation has that packed-dim info.
- ``z[s, r]`` (continuous in [0, 1], integral at the optimum): a clone of ``s`` into ``r``
  exists; ``z[s, r] >= y[u, r] - x[s, r]`` for every use ``u`` of ``s``, so consumers that
  need the same target share one clone, as ExecuTorch's transition cache does.

Objective: the number of clones (``count``) or the bytes they write (``bytes``), plus a
tie-break worth less than half a unit of cost in total that prefers ExecuTorch's default
representation (width-packed texture), so equal-cost optima are chosen reproducibly.
Forced choices (singleton domains) are fixed by HiGHS' presolve.
"""

import math
import time
from dataclasses import dataclass

import executorch.backends.vulkan.utils as vk_utils
import highspy
import numpy as np
from executorch.backends.vulkan._passes.tag_memory_meta_pass import TagMemoryMetaPass
from executorch.exir.pass_base import PassResult

from strategies.errors import InvalidAssignmentError
from strategies._registry import register_strategy
from strategies.representations import DEFAULT_REPR, packed_dim_info
from strategies.layout_problem import (
    LayoutProblem,
    apply_assignment,
    extract,
    infeasible_operators,
    needed_transitions,
    shared_packed_dim_infos,
    sync_components,
)

OBJECTIVES = ("count", "bytes")


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


class _Model:
    """Columns and rows accumulated in plain lists, handed to HiGHS in one piece."""

    def __init__(self):
        self.cost, self.upper, self.integer = [], [], []
        self.rows_lower, self.rows_upper, self.row_starts = [], [], [0]
        self.row_index, self.row_value = [], []

    def column(self, cost: float = 0.0, integer: bool = True) -> int:
        self.cost.append(cost)
        self.upper.append(1.0)
        self.integer.append(integer)
        return len(self.cost) - 1

    def row(self, entries, lower: float, upper: float) -> None:
        for index, value in entries:
            self.row_index.append(index)
            self.row_value.append(value)
        self.row_starts.append(len(self.row_index))
        self.rows_lower.append(lower)
        self.rows_upper.append(upper)

    def solve(self, time_limit: float, start: list[float] | None = None) -> highspy.Highs:
        highs = highspy.Highs()
        highs.setOptionValue("output_flag", False)
        highs.setOptionValue("time_limit", float(time_limit))
        highs.setOptionValue("mip_rel_gap", 0.0)
        highs.setOptionValue("random_seed", 0)
        highs.setOptionValue("threads", 1)
        n = len(self.cost)
        highs.addCols(n, np.array(self.cost), np.zeros(n), np.array(self.upper), 0,
                      np.array([], dtype=np.int32), np.array([], dtype=np.int32), np.array([]))
        integer = np.array([i for i, flag in enumerate(self.integer) if flag], dtype=np.int32)
        highs.changeColsIntegrality(len(integer), integer,
                                    np.full(len(integer), highspy.HighsVarType.kInteger))
        highs.addRows(len(self.rows_lower), np.array(self.rows_lower), np.array(self.rows_upper),
                      len(self.row_index), np.array(self.row_starts[:-1], dtype=np.int32),
                      np.array(self.row_index, dtype=np.int32), np.array(self.row_value))
        if start is not None:
            # A feasible incumbent: a time limit then always leaves an assignment to return.
            incumbent = highspy.HighsSolution()
            incumbent.col_value = start
            incumbent.value_valid = True
            highs.setSolution(incumbent)
        highs.run()
        return highs


@dataclass
class Formulation:
    """The ILP of one problem: the model and the columns of its x, y, z and w variables."""

    model: _Model
    x: dict
    y: list
    tie_budget: float
    z: dict
    w: list

    @property
    def variables(self) -> int:
        return len(self.model.cost)

    @property
    def constraints(self) -> int:
        return len(self.model.rows_lower)


def formulate(problem: LayoutProblem, objective: str = "count") -> Formulation:
    """Build the ILP of a problem (see the module docstring)."""
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}, not {objective!r}")
    model = _Model()
    # Costs are integers, so a tie-break summing to less than 1/2 never trades a unit of cost.
    tie_break = 0.5 / (len(problem.tensors) + 1)

    x = {
        key: {r: model.column(0.0 if r == DEFAULT_REPR else tie_break) for r in tensor.domain}
        for key, tensor in problem.tensors.items()
    }
    y = [{r: model.column() for r in use.domain} for use in problem.uses]
    for choices in (*x.values(), *y):
        model.row([(c, 1.0) for c in choices.values()], 1.0, 1.0)

    z: dict = {}
    for use, use_choices in zip(problem.uses, y):
        for source in use.sources:
            for r, y_col in use_choices.items():
                if (source, r) not in z:
                    z[(source, r)] = model.column(problem.transition_cost(source, r, objective), integer=False)
                entries = [(z[(source, r)], 1.0), (y_col, -1.0)]
                if r in x[source]:
                    entries.append((x[source][r], 1.0))
                model.row(entries, 0.0, highspy.kHighsInf)

    w_columns = []
    for group in problem.sync_groups:
        members = [x[ref] if kind == "tensor" else y[ref] for kind, ref in group.members]
        infos = sorted({packed_dim_info(r) for m in members for r in m}, key=str)
        w = {p: model.column() for p in infos}
        w_columns.append(w)
        model.row([(c, 1.0) for c in w.values()], 1.0, 1.0)
        for choices in members:
            for p, w_col in w.items():
                entries = [(c, 1.0) for r, c in choices.items() if packed_dim_info(r) == p]
                model.row(entries + [(w_col, -1.0)], 0.0, 0.0)
    return Formulation(model, x, y, tie_break * len(problem.tensors), z, w_columns)


def feasible_start(problem: LayoutProblem, formulation: Formulation) -> list[float] | None:
    """Column values of a feasible assignment (each sync component on a packed-dim info all
    its members allow, the default representation where free), or None if none is obvious."""
    choice: dict = {}
    for members in sync_components(problem):
        common = shared_packed_dim_infos(problem, members)
        if not common:
            return None
        info = min(common, key=str)
        for member in members:
            matching = [r for r in problem.domain_of(member) if packed_dim_info(r) == info]
            choice[member] = DEFAULT_REPR if DEFAULT_REPR in matching else matching[0]

    def pick(member):
        domain = problem.domain_of(member)
        return choice.get(member, DEFAULT_REPR if DEFAULT_REPR in domain else domain[0])

    values = [0.0] * formulation.variables
    tensor_reprs = {key: pick(("tensor", key)) for key in problem.tensors}
    for key, r in tensor_reprs.items():
        values[formulation.x[key][r]] = 1.0
    for index, use in enumerate(problem.uses):
        r = pick(("use", index))
        values[formulation.y[index][r]] = 1.0
        for source in use.sources:
            if tensor_reprs[source] != r:
                values[formulation.z[(source, r)]] = 1.0
    for group, w in zip(problem.sync_groups, formulation.w):
        values[w[packed_dim_info(pick(group.members[0]))]] = 1.0
    return values


def solve(problem: LayoutProblem, objective: str = "count", time_limit: float = 60.0) -> Solution:
    """The cheapest assignment of the problem, proven optimal unless the time limit hit."""
    start = time.perf_counter()
    formulation = formulate(problem, objective)
    model, x, y = formulation.model, formulation.x, formulation.y
    highs = model.solve(time_limit, feasible_start(problem, formulation))
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
    cost = sum(problem.transition_cost(s, r, objective) for s, r in needed)
    return Solution(
        tensor_reprs=tensor_reprs,
        use_reprs=use_reprs,
        transitions=len(needed),
        cost=cost,
        bound=_cost_bound(info.mip_dual_bound, formulation.tie_budget),
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
