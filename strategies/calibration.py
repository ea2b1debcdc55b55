"""``calibration-N``: the assignments ``layoutbench calibrate`` measures a cost table from.

Round N is the N-th of a sequence of ILP solutions over the same OpRepSets, each putting as
many operator nodes as it can in a (primary input, output) representation pair no earlier
round used, at a small price per transition: together, a few programs measure every node in
as many of its allowed representations as possible. A round depends only on the graph and the
rounds before it, so it is a plain strategy any worker can make; a process keeps the rounds of
each graph it solved, so each costs one solve. A solve's time limit lets its best assignment
stand (coverage, not an optimum, is the point), so another machine may make another program:
each program's node map says what it measured, and the fit needs nothing more. Unlisted: these
are measurements, not layout policies to compare.

``calibration-top-up-N`` (``calibrate --top-up``) is round N restricted to what a device's cost
table (``--costs``) prices outside its support: only the (node, input, output) pairs it has not
measured and whose kernel family or sizes lie outside what it measured are worth covering.
"""

import collections

from costmodel.queries import pair_name
from layoutkit.reference_strategies import CALIBRATION_ROUND_PREFIX
from strategies._registry import register_strategy
from strategies.assignment import Assignment
from strategies.ilp import IlpLayout, Solution, solve
from strategies.layout_problem import LayoutProblem, extract
from strategies.objective import Objective
from strategies.priced_layout import PricedLayout

MAX_ROUNDS = 8
NEW_PAIR_VALUE = -1.0  # a node measured in a pair of representations no round used yet
TRANSITION_PRICE = 0.25  # what a round pays per clone for new pairs: four of them buy one


class Coverage(Objective):
    """Novelty: an operator node in a pair no round has covered yet (``covered``: (node, input,
    output) as a cost table names them) is worth :data:`NEW_PAIR_VALUE`, one already covered
    nothing; each clone costs :data:`TRANSITION_PRICE`."""

    prices_nodes = True

    def __init__(self, problem: LayoutProblem, covered: frozenset = frozenset()):
        super().__init__(problem)
        self.covered = covered

    def node_cost(self, op: str, input_repr, output_repr) -> float:
        return 0.0 if _pair(op, input_repr, output_repr) in self.covered else NEW_PAIR_VALUE

    def transition_cost(self, source, origin, target) -> float:
        return TRANSITION_PRICE

    def cover(self, assignment: Assignment) -> "Coverage":
        """The coverage once ``assignment``'s nodes are measured too."""
        return Coverage(self.problem, self.covered | pairs_of(assignment))


def _pair(op: str, input_repr, output_repr) -> tuple[str, str, str]:
    return op, pair_name(input_repr) if input_repr else "", pair_name(output_repr)


def pairs_of(assignment: Assignment) -> set:
    """Its operator nodes' (node, input, output) pairs, named as :class:`Coverage` names them."""
    return {_pair(*reads) for reads in assignment.operator_reprs()}


class _Rounds:
    """The rounds of one graph's problem, solved as they are first asked for."""

    def __init__(self, coverage: Coverage):
        self.coverage = coverage  # of the rounds solved so far
        self.solutions: list = []

    def solution(self, number: int, time_limit: float):
        while len(self.solutions) < number:
            found = solve(self.coverage, time_limit)
            self.coverage = self.coverage.cover(found.assignment)
            self.solutions.append(found)
        return self.solutions[number - 1]


# The rounds of the graphs this process solved last (a worker lowers one model's rounds in turn;
# a long sweep's earlier graphs are let go).
_rounds_by_graph: collections.OrderedDict[tuple, _Rounds] = collections.OrderedDict()
KEPT_GRAPHS = 64


def _kept_rounds(key: tuple, coverage: Coverage) -> _Rounds:
    """The rounds kept under ``key``, else new ones from ``coverage``; the most recent kept last."""
    rounds = _rounds_by_graph.pop(key, None) or _Rounds(coverage)
    _rounds_by_graph[key] = rounds
    while len(_rounds_by_graph) > KEPT_GRAPHS:
        _rounds_by_graph.popitem(last=False)
    return rounds


class CalibrationLayout(IlpLayout):
    """The ``round``-th calibration assignment (see the module docstring)."""

    objective = Coverage
    round = 1
    time_limit_seconds = 20.0

    def rounds(self, problem: LayoutProblem) -> _Rounds:
        return _kept_rounds((problem.graph,), self.objective(problem))

    def solution_of(self, graph_module) -> Solution:
        return self.rounds(extract(self, graph_module)).solution(self.round, self.time_limit_seconds)


def outside_pairs(problem: LayoutProblem, table) -> set:
    """The (node, input, output) pairs of ``problem``'s domains that ``table`` prices fitted and
    outside its support, named as :class:`Coverage` names them."""
    node_prices, _ = problem.prices(table)
    keys = list(node_prices)
    return {_pair(*key) for key, query in zip(keys, problem.queries(keys, []))
            if not node_prices[key].measured and table.support and table.support.place(query)[1]}


def top_up_rounds(problem: LayoutProblem, table) -> _Rounds:
    """The top-up rounds of ``problem`` under ``table``: only its pairs :func:`outside_pairs` are worth covering."""
    every = {_pair(*key) for key in problem.prices(table)[0]}
    return _kept_rounds((problem.graph, table.digest),
                        Coverage(problem, frozenset(every - outside_pairs(problem, table))))


def pairs_covered_per_round(problem: LayoutProblem, table) -> list[int]:
    """How many pairs :func:`outside_pairs` each top-up round of ``problem`` covers first: the
    rounds before the first that covers none (a later one would solve the same problem again)."""
    rounds, covered = top_up_rounds(problem, table), []
    while len(covered) < MAX_ROUNDS:
        before = len(rounds.coverage.covered)
        rounds.solution(len(covered) + 1, CalibrationLayout.time_limit_seconds)
        if len(rounds.coverage.covered) == before:
            break
        covered.append(len(rounds.coverage.covered) - before)
    return covered


class TopUpLayout(PricedLayout, CalibrationLayout):
    """The ``round``-th calibration assignment of the pairs its table prices outside its support."""

    def rounds(self, problem: LayoutProblem) -> _Rounds:
        return top_up_rounds(problem, self.table)


def round_name(number: int) -> str:
    return f"{CALIBRATION_ROUND_PREFIX}{number}"


def top_up_round_name(number: int) -> str:
    return f"{CALIBRATION_ROUND_PREFIX}top-up-{number}"


def is_round(strategy: str) -> bool:
    """Whether ``strategy`` names a calibration round (a measurement, not a layout policy)."""
    return strategy in {name(n) for n in range(1, MAX_ROUNDS + 1) for name in (round_name, top_up_round_name)}


for _number in range(1, MAX_ROUNDS + 1):
    for _name, _base in ((round_name, CalibrationLayout), (top_up_round_name, TopUpLayout)):
        register_strategy(_name(_number), listed=False)(type(f"{_base.__name__.removesuffix('Layout')}Round{_number}",
                                                             (_base,), {"round": _number, "__module__": __name__}))
