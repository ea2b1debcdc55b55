"""One objective and one assignment type for every search: strategies name their objective (no
string branches), the ILP and the local search take the same objects, an assignment is immutable
and yields its transitions once each, in one order."""

import ast
import dataclasses
from pathlib import Path

import pytest
from executorch.backends.vulkan.serialization.vulkan_graph_schema import VkMemoryLayout, VkStorageType

from strategies.assignment import Assignment
from strategies.bfs_refined import LocalSearch
from strategies.ilp import solve
from strategies.layout_problem import LayoutProblem, SyncGroup, Tensor, Use
from strategies.objective import TransitionBytes, TransitionCount
from strategies.representations import tensor_bytes

STRATEGIES = Path(__file__).resolve().parents[1] / "strategies"
OBJECTIVE_NAMES = {"count", "bytes", "time"}
ASSIGNMENT_PAIR = "tuple[dict, list]"  # (tensor representations, use representations)
WIDTH = (VkStorageType.TEXTURE_3D, VkMemoryLayout.TENSOR_WIDTH_PACKED)
HEIGHT = (VkStorageType.TEXTURE_3D, VkMemoryLayout.TENSOR_HEIGHT_PACKED)


def string_objectives(source: str) -> list[str]:
    """Where ``source`` compares with an objective's name, takes an objective as a string, or
    passes an assignment as a tuple of its parts."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            compared = [node.left, *node.comparators]
            named = [c for c in compared for c in ([c] if isinstance(c, ast.Constant) else getattr(c, "elts", []))]
            if any(isinstance(c, ast.Constant) and c.value in OBJECTIVE_NAMES for c in named):
                found.append(f"line {node.lineno}: compares with an objective's name")
        elif isinstance(node, ast.arg) and node.annotation is not None:
            annotation = ast.unparse(node.annotation)
            if node.arg == "objective" and annotation == "str":
                found.append(f"line {node.lineno}: objective: str")
            if ASSIGNMENT_PAIR in annotation:
                found.append(f"line {node.lineno}: an assignment as {annotation}")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns is not None:
            if ASSIGNMENT_PAIR in ast.unparse(node.returns):
                found.append(f"line {node.lineno}: returns an assignment as {ast.unparse(node.returns)}")
    return found


@pytest.mark.parametrize("path", sorted(STRATEGIES.glob("*.py")), ids=lambda path: path.name)
def test_no_objective_is_a_string_in_strategies(path):
    assert string_objectives(path.read_text()) == []


def test_the_rule_catches_what_it_is_for():
    caught = ['if objective != "time":\n    pass', 'x = 1.0 if objective == "count" else 2.0',
              'ok = objective in ("count", "bytes")', "def f(problem, objective: str = 'count'): pass",
              "def f(reference: tuple[dict, list] | None): pass", "def f() -> tuple[dict, list]: pass"]
    assert all(string_objectives(source) for source in caught), [s for s in caught if not string_objectives(s)]
    fine = ['if name == "bfs-time":\n    pass', "def f(objective: Objective): pass", 'unit = "count"',
            "def prices(table) -> tuple[dict, dict]: pass"]
    assert not [source for source in fine if string_objectives(source)]


def _two_small_or_one_large() -> LayoutProblem:
    """``join`` reads two small tensors and a large one in one packed dim (a sync group); each
    small one is also read height-packed, the large one width-packed: joining width-packed
    clones both small ones, height-packed only the large one."""
    tensors = {key: Tensor(key, key[0], [WIDTH, HEIGHT], shape, 4)
               for key, shape in ((("small1", 0), (1, 1, 4, 4)), (("small2", 0), (1, 1, 4, 4)),
                                  (("large", 0), (1, 64, 64, 64)))}
    small1, small2, large = tensors
    uses = [Use("p1", 0, [small1], [HEIGHT]), Use("p2", 0, [small2], [HEIGHT]), Use("q", 0, [large], [WIDTH]),
            *(Use("join", index, [key], [WIDTH, HEIGHT]) for index, key in enumerate(tensors))]
    return LayoutProblem(tensors=tensors, uses=uses,
                         sync_groups=[SyncGroup("join", [("use", 3), ("use", 4), ("use", 5)])])


def test_an_assignment_needs_each_transition_once_in_one_order_and_cannot_change():
    problem = _two_small_or_one_large()
    joined_wide = Assignment(problem, dict.fromkeys(problem.tensors, WIDTH), [HEIGHT, HEIGHT, WIDTH] + [WIDTH] * 3)
    assert joined_wide.transitions == ((("small1", 0), HEIGHT), (("small2", 0), HEIGHT))
    assert joined_wide.clones == [(("small1", 0), WIDTH, HEIGHT), (("small2", 0), WIDTH, HEIGHT)]
    with pytest.raises(dataclasses.FrozenInstanceError):
        joined_wide.uses = ()
    with pytest.raises(TypeError):
        joined_wide.tensors[("large", 0)] = HEIGHT
    assert joined_wide == Assignment(_two_small_or_one_large(), dict(joined_wide.tensors), list(joined_wide.uses))


def test_the_ilp_and_the_local_search_minimise_the_objective_they_are_given():
    """By count, joining height-packed (one clone) is best; by bytes, width-packed (two small
    clones). Each search, from the other objective's optimum, reaches its own objective's."""
    problem = _two_small_or_one_large()
    optima = {objective: solve(objective(problem)) for objective in (TransitionCount, TransitionBytes)}
    by_count, by_bytes = optima[TransitionCount], optima[TransitionBytes]
    assert by_count.optimal and by_bytes.optimal
    assert by_count.cost == 1 and by_count.assignment.uses[3:] == (HEIGHT,) * 3
    assert by_bytes.cost == 2 * tensor_bytes([1, 1, 4, 4], 4, *HEIGHT) and by_bytes.assignment.uses[3:] == (WIDTH,) * 3
    for objective, start, optimum in ((TransitionBytes, by_count, by_bytes), (TransitionCount, by_bytes, by_count)):
        search = LocalSearch(start.assignment, objective(problem))
        search.run()
        assert objective(problem).cost(search.assignment()) == optimum.cost, objective.__name__
