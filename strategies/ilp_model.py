"""The ILP of a layout problem, as HiGHS takes it (:func:`formulate`), and the values of its
columns for a known assignment, to start from (:func:`column_values`).

Formulation over a :class:`~strategies.layout_problem.LayoutProblem`:

- ``x[t, r]`` (binary): tensor ``t`` is stored as ``r``; one per tensor.
- ``y[u, r]`` (binary): use ``u`` (an operator argument) reads ``r``; one per use.
- ``w[g, p]`` (binary): sync group ``g`` has packed-dim info ``p``; each member's
  representation has that packed-dim info.
- ``z[s, r]`` (continuous in [0, 1], integral at the optimum): a clone of ``s`` into ``r``
  exists; ``z[s, r] >= y[u, r] - x[s, r]`` for every use ``u`` of ``s``, so consumers that
  need the same target share one clone, as ExecuTorch's transition cache does.

Objective: an :class:`~strategies.objective.Objective`'s cost of the assignment (the number
of clones, the bytes they write, or a predicted GPU time under a cost table), plus a tie-break
that prefers ExecuTorch's default representation (width-packed texture), so equal-cost optima
are chosen reproducibly; it sums to less than half a unit of an integral objective's cost,
and to a microsecond's thousandth of a time. A clone's cost sits on its ``z``, unless the
objective prices nodes (a time):

- ``c[o, a, b]`` (continuous, integral at the optimum): operator ``o`` reads its primary
  argument as ``a`` and writes ``b``; its marginals are that use's ``y`` and its output's
  ``x``, and it costs the node's time in (a, b). Where the time does not depend on ``a``,
  the cost sits on ``x`` directly and no ``c`` is made.
- ``t[s, f, r]`` (continuous): the clone of ``s`` into ``r`` copies from ``f``, costing that
  transition's time; ``z[s, r]`` is their sum and ``t[s, f, r] <= x[s, f]``. (Rather than the
  linearisation ``t >= z + x[s, f] - 1``, whose relaxation lets a half-read clone cost
  nothing: this one keeps each clone's cost in the relaxation, and HiGHS proves the optimum
  of models that ran out of time before.)

Forced choices (singleton domains) are fixed by HiGHS' presolve.
"""

from dataclasses import dataclass, field

import highspy
import numpy as np

from strategies.assignment import Assignment
from strategies.layout_problem import LayoutProblem, shared_packed_dim_infos, sync_components
from strategies.objective import Objective
from strategies.representations import DEFAULT_REPR, packed_dim_info

INTEGRAL_TIE_BUDGET = 0.5  # the tie-break's total under an integral objective: never trades a unit of cost
TIME_TIE_BUDGET_MS = 1e-6  # the tie-break's total under any other


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
        self.row_index += [index for index, _ in entries]
        self.row_value += [value for _, value in entries]
        self.row_starts.append(len(self.row_index))
        self.rows_lower.append(lower)
        self.rows_upper.append(upper)

    def solve(self, time_limit: float, start: list[float] | None = None, relative_gap: float = 0.0) -> highspy.Highs:
        highs = highspy.Highs()
        options = {"output_flag": False, "time_limit": float(time_limit), "mip_rel_gap": relative_gap,
                   "random_seed": 0, "threads": 1}
        for option, value in options.items():
            highs.setOptionValue(option, value)
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


def formulate(objective: Objective) -> Formulation:
    """Build the ILP of the objective's problem (see the module docstring)."""
    problem, priced = objective.problem, objective.prices_nodes
    model = _Model()
    tie_break = (INTEGRAL_TIE_BUDGET if objective.integral else TIME_TIE_BUDGET_MS) / (len(problem.tensors) + 1)

    x = {key: {r: model.column(0.0 if r == DEFAULT_REPR else tie_break) for r in tensor.domain}
         for key, tensor in problem.tensors.items()}
    y = [{r: model.column() for r in use.domain} for use in problem.uses]
    for choices in (*x.values(), *y):
        model.row([(c, 1.0) for c in choices.values()], 1.0, 1.0)

    z: dict = {}
    t: dict = {}
    for use, use_choices in zip(problem.uses, y):
        for source in use.sources:
            for r, y_col in use_choices.items():
                if (source, r) not in z:
                    cost = 0.0 if priced else objective.transition_cost(source, None, r)
                    z[(source, r)] = model.column(cost, integer=False)
                    if priced:
                        columns = _price_transition(model, objective, x[source], source, r, z[(source, r)])
                        t.update({(source, origin, r): column for origin, column in columns.items()})
                entries = [(z[(source, r)], 1.0), (y_col, -1.0)]
                if r in x[source]:
                    entries.append((x[source][r], 1.0))
                model.row(entries, 0.0, highspy.kHighsInf)
    c = {op: pairs for op in problem.operators if priced and (pairs := _price_operator(model, objective, op, x, y))}

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


def _price_transition(model: _Model, objective: Objective, source_choices: dict, source, target,
                      z_column: int) -> dict:
    """The cost of the clone of ``source`` into ``target``, by the representation it copies
    from: a ``t`` column per origin, at most its ``x``, summing to ``z``."""
    columns = {}
    for origin, x_column in source_choices.items():
        if origin != target:
            columns[origin] = model.column(objective.transition_cost(source, origin, target), integer=False)
            model.row([(columns[origin], 1.0), (x_column, -1.0)], -highspy.kHighsInf, 0.0)
    model.row([(column, 1.0) for column in columns.values()] + [(z_column, -1.0)], 0.0, 0.0)
    return columns


def _price_operator(model: _Model, objective: Objective, op: str, x: dict, y: list) -> dict:
    """An operator node's cost in the representations it reads and writes: on its output's
    ``x`` columns, or on ``c`` columns (returned) where its input matters."""
    problem = objective.problem
    output_key = problem.op_outputs[op][0]
    output = x[output_key]
    primary = problem.operators[op].primary_use
    inputs = y[primary] if primary is not None else {None: None}
    # Where a sync rule ties the two, only pairs with one packed-dim info can occur.
    synced = any(g.op == op and ("use", primary) in g.members and ("tensor", output_key) in g.members
                 for g in problem.sync_groups)
    costs = {(a, b): objective.node_cost(op, a, b) for a in inputs for b in output
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


def default_assignment(problem: LayoutProblem) -> Assignment | None:
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

    return Assignment(problem, {key: pick(("tensor", key)) for key in problem.tensors},
                      [pick(("use", index)) for index in range(len(problem.uses))])


def column_values(formulation: Formulation, assignment: Assignment) -> list[float]:
    """Every column's value for an assignment: a start HiGHS can take as its incumbent."""
    values = [0.0] * formulation.variables
    for key, r in assignment.tensors.items():
        values[formulation.x[key][r]] = 1.0
    for index, r in enumerate(assignment.uses):
        values[formulation.y[index][r]] = 1.0
    for source, origin, target in assignment.clones:
        values[formulation.z[(source, target)]] = 1.0
        if (source, origin, target) in formulation.t:
            values[formulation.t[(source, origin, target)]] = 1.0
    reads = {op: (primary, output) for op, primary, output in assignment.operator_reprs()}
    for op, pairs in formulation.c.items():
        values[pairs[reads[op]]] = 1.0
    for group, w in zip(assignment.problem.sync_groups, formulation.w):
        kind, ref = group.members[0]
        values[w[packed_dim_info(assignment.tensors[ref] if kind == "tensor" else assignment.uses[ref])]] = 1.0
    return values
