"""What ``ilp-time`` minimises: an assignment's predicted GPU time, plus the price of what the
cost table is unsure of, relative to an anchor it leaves only for a saving it can measure.

A cost table measures some prices on the model itself and fits the rest, with an error it
expects of the fit per operator (:mod:`costmodel.table`). An optimiser that takes fitted
prices at face value buys savings the fit only imagines: it puts a node in a pair the table
prices a few per cent lower, where the table is wrong by more than that. So a node that
leaves its *reference* pair pays, on top of its price in the new pair, the error expected of
that price (``caution`` times the relative error of either price, on the larger of the two);
a node priced from its own measurement pays nothing extra. A transition is priced at its
fitted price plus its expected error: it is the certain cost of a move whose savings are
uncertain.

ilp-time's reference, its *anchor*, is ExecuTorch's own choices or the assignment with the
fewest transitions, whichever costs less with the doubt over leaving ExecuTorch's charged.
The optimum relative to the anchor replaces it only where it saves more than the table's
spread (how much runs of one program differ): a smaller saving is not one a run can show,
and a program changed for it may run slower by as much (:func:`strategies.ilp.solve`;
bfs-time keeps the faster of bfs-downstream's and bfs-refined's assignments by the same rule,
:func:`saves_beyond_spread`).
"""

from strategies.layout_problem import LayoutProblem, needed_transitions

CAUTION = 1.0  # expected errors charged per unit of uncertainty


def cheapest(time_objective: "TimeObjective", candidates: list) -> tuple[dict, list] | None:
    """The first of ``candidates`` (assignments, None where there is none) that costs least."""
    candidates = [c for c in candidates if c is not None]
    return min(candidates, key=lambda c: time_objective.cost(*c)) if candidates else None


def saves_beyond_spread(anchor_cost: float, cost: float, spread: float) -> bool:
    """Whether ``cost`` is below ``anchor_cost`` by more than ``spread`` (relative to the
    anchor's): only then does a time objective's search leave its anchor."""
    return anchor_cost - cost > spread * anchor_cost


class TimeObjective:
    """Costs of one problem's choices under one table, relative to a reference assignment
    (None: plain predicted time)."""

    def __init__(self, problem: LayoutProblem, table, reference: tuple[dict, list] | None = None,
                 caution: float = CAUTION):
        self.problem, self.table, self.caution = problem, table, caution
        self.reference = dict(self._reads(*reference)) if reference else {}

    def _reads(self, tensor_reprs: dict, use_reprs: list):
        for op, primary, output in self.problem.operator_reprs(tensor_reprs, use_reprs):
            yield op, (primary, output)

    def node_cost(self, op: str, input_repr, output_repr) -> float:
        price = self.problem.node_price(self.table, op, input_repr, output_repr)
        reference = self.reference.get(op)
        if reference is None or reference == (input_repr, output_repr) or not self.caution:
            return price.ms
        other = self.problem.node_price(self.table, op, *reference)
        return price.ms + self.caution * max(price.error, other.error) * max(price.ms, other.ms)

    def transition_cost(self, source, source_repr, target) -> float:
        price = self.problem.transition_price(self.table, source, source_repr, target)
        return price.ms * (1 + self.caution * price.error) if self.reference else price.ms

    def cost(self, tensor_reprs: dict, use_reprs: list) -> float:
        """An assignment's cost: its nodes' and transitions' costs above."""
        nodes = sum(self.node_cost(op, *pair) for op, pair in self._reads(tensor_reprs, use_reprs))
        return nodes + sum(self.transition_cost(source, tensor_reprs[source], target)
                           for source, target in needed_transitions(self.problem, tensor_reprs, use_reprs))

