"""Exhaustive search over a LayoutProblem: the reference the ILP is held to.

Depth-first over every tensor and use choice in graph order (sources before their uses),
rejecting partial assignments that break a sync group, cutting branches whose cost already
reaches the best complete assignment found, and those that reach a state the rest of the
search depends on (the earlier choices it still reads, the transitions already made of
tensors it still reads) at no less cost than before. Independent of the ILP: no
linearisation, no solver.
"""

import math

from strategies.layout_problem import DEFAULT_REPR, LayoutProblem, packed_dim_info
from strategies.objective import Objective


def _decision_order(problem: LayoutProblem) -> list:
    """Operators in graph order: each use after its sources, a graph input or constant just
    before its first use (so few choices are held open at once), an operator's outputs last."""
    order = []
    uses_of: dict[str, list[int]] = {}
    for index, use in enumerate(problem.uses):
        uses_of.setdefault(use.op, []).append(index)
    for op_name, outputs in problem.op_outputs.items():
        for index in uses_of.get(op_name, []):
            order += [("tensor", k) for k in problem.uses[index].sources
                      if k[0] not in problem.op_outputs and ("tensor", k) not in order]
            order.append(("use", index))
        order += [("tensor", k) for k in outputs]
    return order + [("tensor", k) for k in problem.tensors if ("tensor", k) not in order]


def _needed_until(problem: LayoutProblem, order: list, objective: Objective) -> tuple[dict, dict]:
    """For each member, the last position whose choice or cost reads its choice; for each
    tensor, the last position of a use of it (whose transitions it shares)."""
    position = {member: index for index, member in enumerate(order)}
    needed: dict = {}
    last_use: dict = {}
    for index, member in enumerate(order):
        if member[0] == "use":
            for source in problem.uses[member[1]].sources:
                needed[("tensor", source)] = last_use[source] = index
    for group in problem.sync_groups:
        last = max(position[m] for m in group.members)
        for member in group.members:
            needed[member] = max(needed.get(member, -1), last)
    if objective.prices_nodes:  # an operator is priced by its primary use's choice, with its first output
        for op, outputs in problem.op_outputs.items():
            primary = problem.operators[op].primary_use
            if primary is not None:
                use = ("use", primary)
                needed[use] = max(needed.get(use, -1), position[("tensor", outputs[0])])
    return needed, last_use


def optimum(objective: Objective) -> float:
    """The least cost of any assignment of the objective's problem: of its transitions, and of
    its operators where the objective prices them."""
    problem = objective.problem
    order = _decision_order(problem)
    first_outputs = {outputs[0]: op for op, outputs in problem.op_outputs.items()}
    groups_of: dict = {}
    for group in problem.sync_groups:
        for member in group.members:
            groups_of.setdefault(member, []).append(group.members)
    needed, last_use = _needed_until(problem, order, objective)
    # What the rest of the search depends on at each position: the choices it still reads,
    # and which tensors still to be read already have a transition (a later use shares it).
    live = [[m for m in order[:index] if needed.get(m, -1) >= index] for index in range(len(order))]

    chosen: dict = {}
    clones: set = set()  # (source, repr): a transition made
    state = {"cost": 0.0, "best": math.inf}
    least_cost_at: dict = {}  # what the rest depends on -> the least cost it was reached with

    def clone_cost(source, representation) -> float:
        return objective.transition_cost(source, chosen[("tensor", source)], representation)

    def node_cost(member) -> float:
        """An operator's cost, known once its first output is chosen (its uses come first)."""
        op = first_outputs.get(member[1]) if objective.prices_nodes and member[0] == "tensor" else None
        if op is None:
            return 0.0
        primary = problem.operators[op].primary_use
        reads = chosen[("use", primary)] if primary is not None else None
        return objective.node_cost(op, reads, chosen[member])

    def consistent(member) -> bool:
        for members in groups_of.get(member, []):
            if len({packed_dim_info(chosen[m]) for m in members if m in chosen}) > 1:
                return False
        return True

    def candidates(member) -> list:
        kind, ref = member
        domain = problem.domain_of(member)
        preferred = DEFAULT_REPR if kind == "tensor" else chosen[("tensor", problem.uses[ref].sources[0])]
        return sorted(domain, key=lambda r: r != preferred)

    def visit(position: int) -> None:
        if state["cost"] >= state["best"]:
            return
        if position == len(order):
            state["best"] = state["cost"]
            return
        # Reached before at no greater cost with the same earlier choices still read and
        # transitions still shared: every completion from here was weighed then.
        key = (position, tuple(chosen[m] for m in live[position]),
               frozenset(pair for pair in clones if last_use.get(pair[0], -1) >= position))
        if least_cost_at.get(key, math.inf) <= state["cost"]:
            return
        least_cost_at[key] = state["cost"]
        member = order[position]
        for representation in candidates(member):
            chosen[member] = representation
            own = node_cost(member)
            added = []
            if member[0] == "use":
                for source in problem.uses[member[1]].sources:
                    pair = (source, representation)
                    if chosen[("tensor", source)] != representation and pair not in clones:
                        own += clone_cost(source, representation)
                        clones.add(pair)
                        added.append(pair)
            state["cost"] += own
            if consistent(member):
                visit(position + 1)
            state["cost"] -= own
            clones.difference_update(added)
            del chosen[member]

    visit(0)
    return state["best"]
