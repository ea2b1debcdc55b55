"""What a search over a layout problem's assignments minimises: an :class:`Objective`, which the
ILP (:mod:`strategies.ilp_model`) and the local searches (:mod:`strategies.bfs_refined`) both
take. A strategy names its own: :class:`TransitionCount`, :class:`TransitionBytes`,
:class:`PredictedTime`, or the calibration rounds' coverage (:mod:`strategies.calibration`).

A cost table measures some prices on the model itself and fits the rest, with an error it
expects of the fit per operator (:mod:`costmodel.table`); an optimiser that takes fitted
prices at face value buys savings the fit only imagines. So, relative to a *reference*
assignment, a node that leaves the reference's pair pays on top of its price the error
expected of it (:data:`CAUTION` times the relative error of either price, on the larger of the
two; nothing where both were measured), and a transition its price plus its expected error.
ilp-time's reference, its *anchor*, is ExecuTorch's own choices or the fewest transitions,
whichever costs less with the doubt over leaving ExecuTorch's charged; the optimum replaces it
only where it saves more than the table's spread (how much runs of one program differ), which
is all a run can show (:func:`strategies.ilp.solve`; bfs-time keeps the faster of
bfs-downstream's and bfs-refined's by the same rule; docs/gpu-time.md: the numbers).
"""

from costmodel.pricing import Pricing
from strategies.assignment import Assignment
from strategies.layout_problem import LayoutProblem
from strategies.representations import tensor_bytes

CAUTION = 1.0  # expected errors charged per unit of uncertainty


class Objective:
    """The cost of one problem's choices: of a clone (a transition) from the representation it
    copies from to the one it copies to, of an operator node in the representations it reads
    (its primary argument) and writes (its first output), and of a whole assignment."""

    integral = False  # costs are whole numbers: the ILP proves its optimum exactly and rounds its bound up
    prices_nodes = False  # operator nodes cost too, and a clone by what it copies from (else by source and target)
    min_gain = 0.0  # what a local search's move must lower the cost by, beyond nothing, to count
    spread = 0.0  # relative: a search leaves its anchor only for a saving above it

    def __init__(self, problem: LayoutProblem):
        self.problem = problem

    def node_cost(self, op: str, input_repr, output_repr) -> float:
        return 0.0

    def transition_cost(self, source, origin, target) -> float:
        """The clone of ``source`` from ``origin`` (None where :attr:`prices_nodes` is not set:
        then no clone's cost depends on it) into ``target``."""
        raise NotImplementedError

    def cost(self, assignment: Assignment) -> float:
        """An assignment's cost: its clones' (summed in their fixed order), and its nodes' first
        where they cost anything."""
        transitions = sum(self.transition_cost(*clone) for clone in assignment.clones)
        if not self.prices_nodes:
            return transitions
        return sum(self.node_cost(op, a, b) for op, a, b in assignment.operator_reprs()) + transitions

    def relative_to(self, reference: Assignment) -> "Objective":
        """This objective with what it is unsure of charged against ``reference``: itself, where
        it is sure of every cost."""
        return self

    def cheapest(self, candidates: list) -> Assignment | None:
        """The first of ``candidates`` (assignments, None where there is none) that costs least."""
        return min((c for c in candidates if c is not None), key=self.cost, default=None)

    def saves_beyond_spread(self, anchor_cost: float, cost: float) -> bool:
        """Whether ``cost`` is below ``anchor_cost`` by more than :attr:`spread` (relative to the
        anchor's): only then does a search leave its anchor."""
        return anchor_cost - cost > self.spread * anchor_cost


class TransitionCount(Objective):
    """The number of clones (``ilp``, ``bfs-refined``)."""

    integral = True

    def transition_cost(self, source, origin, target) -> float:
        return 1.0


class TransitionBytes(Objective):
    """The bytes the clones write, texture padding included (``ilp-bytes``)."""

    integral = True

    def transition_cost(self, source, origin, target) -> float:
        tensor = self.problem.tensors[source]
        return float(tensor_bytes(list(tensor.shape), tensor.element_bytes, *target))


class PredictedTime(Objective):
    """Predicted GPU time (ms) under ``table`` (``ilp-time``, ``bfs-time``), relative to a
    ``reference`` assignment (None: plain predicted time) by the rule of the module docstring.
    Each cost is asked of the table once and kept."""

    prices_nodes = True
    min_gain = 1e-9  # ms: below any price a table holds, above the rounding of a sum

    def __init__(self, problem: LayoutProblem, table: Pricing, reference: Assignment | None = None):
        super().__init__(problem)
        self.table, self.spread = table, table.spread
        self.reference = {op: (a, b) for op, a, b in reference.operator_reprs()} if reference is not None else {}
        self.node_prices, self.transition_prices = problem.prices(table)
        self._costs: dict = {}  # per node and per clone asked for: its cost

    def relative_to(self, reference: Assignment) -> "PredictedTime":
        return PredictedTime(self.problem, self.table, reference)

    def node_cost(self, op: str, input_repr, output_repr) -> float:
        key = (op, input_repr, output_repr)
        if key not in self._costs:
            price = self.node_prices[key]
            reference = self.reference.get(op)
            self._costs[key] = price.ms
            if reference is not None and reference != (input_repr, output_repr):
                other = self.node_prices[(op, *reference)]
                self._costs[key] += CAUTION * max(price.error, other.error) * max(price.ms, other.ms)
        return self._costs[key]

    def transition_cost(self, source, origin, target) -> float:
        key = (source, origin, target)
        if key not in self._costs:
            price = self.transition_prices[key]
            self._costs[key] = price.ms * (1 + CAUTION * price.error) if self.reference else price.ms
        return self._costs[key]
