"""Exhaustive search over a LayoutProblem: the reference the ILP is held to.

Depth-first over every tensor and use choice in graph order (sources before their uses),
rejecting partial assignments that break a sync group, and cutting branches whose clone
cost already reaches the best complete assignment found. Independent of the ILP: no
linearisation, no solver.
"""

import math

from strategies.layout_problem import DEFAULT_REPR, LayoutProblem, packed_dim_info


def _decision_order(problem: LayoutProblem) -> list:
    order = [("tensor", k) for k in problem.tensors if k[0] not in problem.op_outputs]
    uses_of: dict[str, list[int]] = {}
    for index, use in enumerate(problem.uses):
        uses_of.setdefault(use.op, []).append(index)
    for op_name, outputs in problem.op_outputs.items():
        order += [("use", i) for i in uses_of.get(op_name, [])]
        order += [("tensor", k) for k in outputs]
    return order


def optimum(problem: LayoutProblem, objective: str = "count", table=None) -> float:
    """The least cost of any assignment: transitions counted, their bytes, or (``time``)
    the predicted time of operators and transitions under ``table``."""
    order = _decision_order(problem)
    first_outputs = {outputs[0]: op for op, outputs in problem.op_outputs.items()}
    groups_of: dict = {}
    for group in problem.sync_groups:
        for member in group.members:
            groups_of.setdefault(member, []).append(group.members)

    chosen: dict = {}
    clones: dict = {}  # (source, repr) -> number of uses needing it
    state = {"cost": 0.0, "best": math.inf}

    def clone_cost(source, representation) -> float:
        if objective != "time":
            return problem.transition_cost(source, representation, objective)
        return problem.transition_ms(table, source, chosen[("tensor", source)], representation) or 0.0

    def node_cost(member) -> float:
        """An operator's time, known once its first output is chosen (its uses come first)."""
        op = first_outputs.get(member[1]) if objective == "time" and member[0] == "tensor" else None
        if op is None:
            return 0.0
        primary = problem.operators[op].primary_use
        reads = chosen[("use", primary)] if primary is not None else None
        return problem.node_ms(table, op, reads, chosen[member]) or 0.0

    def consistent(member) -> bool:
        for members in groups_of.get(member, []):
            if len({packed_dim_info(chosen[m]) for m in members if m in chosen}) > 1:
                return False
        return True

    def candidates(member) -> list:
        kind, ref = member
        domain = problem.domain_of(member)
        # Cheap choices first, so good complete assignments are found early.
        preferred = DEFAULT_REPR if kind == "tensor" else chosen[("tensor", problem.uses[ref].sources[0])]
        return sorted(domain, key=lambda r: r != preferred)

    def visit(position: int) -> None:
        if state["cost"] >= state["best"]:
            return
        if position == len(order):
            state["best"] = state["cost"]
            return
        member = order[position]
        for representation in candidates(member):
            chosen[member] = representation
            own = node_cost(member)
            state["cost"] += own
            added = []
            if member[0] == "use":
                for source in problem.uses[member[1]].sources:
                    if chosen[("tensor", source)] != representation:
                        pair = (source, representation)
                        if pair not in clones:
                            state["cost"] += clone_cost(source, representation)
                        clones[pair] = clones.get(pair, 0) + 1
                        added.append(pair)
            if consistent(member):
                visit(position + 1)
            for pair in added:
                clones[pair] -= 1
                if not clones[pair]:
                    del clones[pair]
                    state["cost"] -= clone_cost(pair[0], pair[1])
            state["cost"] -= own
            del chosen[member]

    visit(0)
    return state["best"]
