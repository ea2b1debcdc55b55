"""``ilp`` and ``ilp-bytes``: the proven optimum, solved with HiGHS.

Formulation over a :class:`~strategies.layout_problem.LayoutProblem`:

- ``x[t, r]`` (binary): tensor ``t`` is stored as ``r``; one per tensor.
- ``y[u, r]`` (binary): use ``u`` (an operator argument) reads ``r``; one per use.
- ``w[g, p]`` (binary): sync group ``g`` has packed-dim info ``p``; each member's
  representation has that packed-dim info.
- ``z[s, r]`` (continuous in [0, 1], integral at the optimum): a clone of ``s`` into ``r``
  exists; ``z[s, r] >= y[u, r] - x[s, r]`` for every use ``u`` of ``s``, so consumers that
  need the same target share one clone, as ExecuTorch's transition cache does.

Objective: the number of clones (``count``), the bytes they write (``bytes``), or the
predicted GPU time of the assignment under a cost table (``time``, :mod:`strategies.gpu_costs`),
plus a tie-break that prefers ExecuTorch's default representation (width-packed texture), so
equal-cost optima are chosen reproducibly; it sums to less than half a unit of an integer
cost, and to a microsecond's thousandth of a time. For ``time``:

- ``c[o, a, b]`` (continuous, integral at the optimum): operator ``o`` reads its primary
  argument as ``a`` and writes ``b``; its marginals are that use's ``y`` and its output's
  ``x``, and it costs the node's time in (a, b). Where the time does not depend on ``a``,
  the cost sits on ``x`` directly and no ``c`` is made.
- ``t[s, f, r]`` (continuous): the clone of ``s`` into ``r`` copies from ``f``;
  ``t >= z[s, r] + x[s, f] - 1``, costing that transition's time.

Forced choices (singleton domains) are fixed by HiGHS' presolve.
"""

import math
import time
from dataclasses import dataclass, field

import executorch.backends.vulkan.utils as vk_utils
import highspy
import numpy as np
from executorch.backends.vulkan._passes.tag_memory_meta_pass import TagMemoryMetaPass
from executorch.exir.pass_base import PassResult

from layoutkit.errors import InvalidAssignmentError
from strategies.gpu_costs import CostTable
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

OBJECTIVES = ("count", "bytes", "time")
TIME_TIE_BUDGET_MS = 1e-6  # the tie-break's total under the time objective
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

    def solve(self, time_limit: float, start: list[float] | None = None, relative_gap: float = 0.0) -> highspy.Highs:
        highs = highspy.Highs()
        highs.setOptionValue("output_flag", False)
        highs.setOptionValue("time_limit", float(time_limit))
        highs.setOptionValue("mip_rel_gap", relative_gap)
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
    """The ILP of one problem: the model and the columns of its x, y, z, w, c and t variables."""

    model: _Model
    x: dict
    y: list
    tie_budget: float
    z: dict
    w: list
    c: dict = field(default_factory=dict)  # operator -> {(input repr, output repr): column}
    t: dict = field(default_factory=dict)  # (source, origin repr, target repr) -> column

    @property
    def variables(self) -> int:
        return len(self.model.cost)

    @property
    def constraints(self) -> int:
        return len(self.model.rows_lower)


def formulate(problem: LayoutProblem, objective: str = "count", table: CostTable | None = None) -> Formulation:
    """Build the ILP of a problem (see the module docstring); ``table`` prices ``time``."""
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}, not {objective!r}")
    timed = objective == "time"
    if timed and table is None:
        raise ValueError("the time objective needs a cost table")
    model = _Model()
    # Integer costs: a tie-break summing to less than 1/2 never trades a unit of cost.
    tie_break = (TIME_TIE_BUDGET_MS if timed else 0.5) / (len(problem.tensors) + 1)

    x = {
        key: {r: model.column(0.0 if r == DEFAULT_REPR else tie_break) for r in tensor.domain}
        for key, tensor in problem.tensors.items()
    }
    y = [{r: model.column() for r in use.domain} for use in problem.uses]
    for choices in (*x.values(), *y):
        model.row([(c, 1.0) for c in choices.values()], 1.0, 1.0)

    z: dict = {}
    t: dict = {}
    for use, use_choices in zip(problem.uses, y):
        for source in use.sources:
            for r, y_col in use_choices.items():
                if (source, r) not in z:
                    cost = 0.0 if timed else problem.transition_cost(source, r, objective)
                    z[(source, r)] = model.column(cost, integer=False)
                    if timed:
                        for origin, column in _price_transition(model, problem, table, x[source], source, r,
                                                                z[(source, r)]).items():
                            t[(source, origin, r)] = column
                entries = [(z[(source, r)], 1.0), (y_col, -1.0)]
                if r in x[source]:
                    entries.append((x[source][r], 1.0))
                model.row(entries, 0.0, highspy.kHighsInf)
    c = {op: pairs for op in problem.operators if timed and (pairs := _price_operator(model, problem, table, op, x, y))}

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
    return Formulation(model, x, y, tie_break * len(problem.tensors), z, w_columns, c, t)


def _price_transition(model: _Model, problem: LayoutProblem, table: CostTable, source_choices: dict,
                      source, target, z_column: int) -> dict:
    """The time of the clone of ``source`` into ``target``, by the representation it copies
    from: a ``t`` column per origin with a time."""
    columns = {}
    for origin, x_column in source_choices.items():
        ms = problem.transition_ms(table, source, origin, target) if origin != target else None
        if ms:
            columns[origin] = model.column(ms, integer=False)
            model.row([(columns[origin], 1.0), (z_column, -1.0), (x_column, -1.0)], -1.0, highspy.kHighsInf)
    return columns


def _price_operator(model: _Model, problem: LayoutProblem, table: CostTable, op: str, x: dict, y: list) -> dict:
    """An operator node's time in the representations it reads and writes (unpriced: 0):
    on its output's ``x`` columns, or on ``c`` columns (returned) where its input matters."""
    output_key = problem.op_outputs[op][0]
    output = x[output_key]
    primary = problem.operators[op].primary_use
    inputs = y[primary] if primary is not None else {None: None}
    # Where a sync rule ties the two, only pairs with one packed-dim info can occur.
    synced = any(g.op == op and ("use", primary) in g.members and ("tensor", output_key) in g.members
                 for g in problem.sync_groups)
    costs = {(a, b): problem.node_ms(table, op, a, b) or 0.0 for a in inputs for b in output
             if not synced or packed_dim_info(a) == packed_dim_info(b)}
    by_output = {b: {ms for (_, out), ms in costs.items() if out == b} for b in output}
    if all(len(times) == 1 for times in by_output.values()):  # the input does not matter
        for b, column in output.items():
            model.cost[column] += by_output[b].pop()
        return {}
    pairs = {pair: model.column(ms, integer=False) for pair, ms in costs.items()}
    for a, y_column in inputs.items():
        model.row([(pairs[(a, b)], 1.0) for b in output if (a, b) in pairs] + [(y_column, -1.0)], 0.0, 0.0)
    for b, x_column in output.items():
        model.row([(pairs[(a, b)], 1.0) for a in inputs if (a, b) in pairs] + [(x_column, -1.0)], 0.0, 0.0)
    return pairs


def default_assignment(problem: LayoutProblem) -> tuple[dict, list] | None:
    """A feasible assignment (each sync component on a packed-dim info all its members
    allow, the default representation where free), or None if none is obvious."""
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

    return ({key: pick(("tensor", key)) for key in problem.tensors},
            [pick(("use", index)) for index in range(len(problem.uses))])


def column_values(problem: LayoutProblem, formulation: Formulation, tensor_reprs: dict, use_reprs: list) -> list[float]:
    """Every column's value for an assignment: a start HiGHS can take as its incumbent."""
    values = [0.0] * formulation.variables
    for key, r in tensor_reprs.items():
        values[formulation.x[key][r]] = 1.0
    for index, (use, r) in enumerate(zip(problem.uses, use_reprs)):
        values[formulation.y[index][r]] = 1.0
        for source in use.sources:
            if tensor_reprs[source] != r:
                values[formulation.z[(source, r)]] = 1.0
                if (source, tensor_reprs[source], r) in formulation.t:
                    values[formulation.t[(source, tensor_reprs[source], r)]] = 1.0
    reads = {op: (primary, output) for op, primary, output in problem.operator_reprs(tensor_reprs, use_reprs)}
    for op, pairs in formulation.c.items():
        values[pairs[reads[op]]] = 1.0
    for group, w in zip(problem.sync_groups, formulation.w):
        kind, ref = group.members[0]
        values[w[packed_dim_info(tensor_reprs[ref] if kind == "tensor" else use_reprs[ref])]] = 1.0
    return values


def _time_start(problem: LayoutProblem, table, time_limit: float) -> tuple[dict, list] | None:
    """The quicker of the default assignment and the count optimum under ``table``: HiGHS
    starts from it, so a time limit never returns worse than the fewest transitions."""
    candidates = [default_assignment(problem)]
    try:
        fewest = solve(problem, "count", time_limit)
        candidates.append((fewest.tensor_reprs, fewest.use_reprs))
    except InvalidAssignmentError:
        pass
    candidates = [c for c in candidates if c is not None]
    return min(candidates, key=lambda c: problem.predicted_ms(table, *c)[0]) if candidates else None


def solve(problem: LayoutProblem, objective: str = "count", time_limit: float = 60.0,
          table: CostTable | None = None) -> Solution:
    """The cheapest assignment of the problem, proven optimal unless the time limit hit."""
    start = time.perf_counter()
    formulation = formulate(problem, objective, table)
    model, x, y = formulation.model, formulation.x, formulation.y
    assignment = _time_start(problem, table, time_limit) if objective == "time" else default_assignment(problem)
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
    if objective == "time":
        cost = problem.predicted_ms(table, tensor_reprs, use_reprs)[0]
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

    def cost_table(self) -> CostTable | None:
        """The table the objective prices with (none for counts and bytes)."""
        return None

    def call(self, graph_module):
        problem = extract(self, graph_module)
        self.solution = solution = solve(problem, self.objective, self.time_limit_seconds, self.cost_table())
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
