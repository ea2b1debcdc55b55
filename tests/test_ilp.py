"""The ILP strategy: equal to exhaustive search, and never worse than a heuristic."""

import pytest

import strategies
from harness.targets.vulkan.compile import metrics, validator
from strategies.ilp import IlpLayout, partition_problems, solve
from strategies.objective import TransitionBytes, TransitionCount

from .helpers import exhaustive
from .conftest import QUICK_ZOO, fast_on_the_small_model
from harness.pipeline.model import pipeline
from harness.targets.vulkan.compile.prefix import vulkan_lowering

RANDOM_GRAPHS = [f"synthetic:{6 + seed % 5}:{seed}" for seed in range(50)]
HEURISTICS = ("bfs-downstream", "bfs-refined", "dfs-upstream", "all-width-packed")


def _ilp_against_exhaustive_search(graphs: list[str]) -> int:
    """Asserts the ILP's optimum by count and by bytes is exhaustive search's on each graph;
    how many graphs needed a transition."""
    nontrivial = 0
    for name in graphs:
        for problem in partition_problems(vulkan_lowering(pipeline(name)).programs):
            by_count = solve(TransitionCount(problem))
            by_bytes = solve(TransitionBytes(problem))
            assert by_count.optimal and by_bytes.optimal
            assert by_count.cost == exhaustive.optimum(TransitionCount(problem)), name
            assert by_bytes.cost == exhaustive.optimum(TransitionBytes(problem)), name
            assert by_count.bound == by_count.cost
            nontrivial += by_count.cost > 0
    return nontrivial


@pytest.mark.slow
def test_ilp_equals_exhaustive_search_on_random_graphs():
    assert _ilp_against_exhaustive_search(RANDOM_GRAPHS) >= 10, "the random graphs must exercise transitions"


def test_ilp_equals_exhaustive_search_on_two_random_graphs():
    """The test above on its first two graphs, one of which needs a transition."""
    assert _ilp_against_exhaustive_search(RANDOM_GRAPHS[:2]) >= 1


@pytest.mark.parametrize("model", fast_on_the_small_model(QUICK_ZOO))
def test_ilp_is_optimal_valid_and_never_worse_than_a_heuristic(model):
    lowering = vulkan_lowering(pipeline(model))
    results = {}
    for name in (*HEURISTICS, "ilp", "ilp-bytes"):
        cls = strategies.get_strategy(name)
        lowered = lowering.lower(cls)
        validator.validate(lowered)
        found = metrics.transitions(lowered)
        results[name] = (len(found), sum(t.bytes for t in found))
        if name.startswith("ilp"):
            summary = strategies.summarize(cls, [p.layout_pass for p in lowered.partitions])
            assert summary["optimal"] is True
            assert summary["objective"] == (len(found) if name == "ilp" else results[name][1])
    for heuristic in HEURISTICS:
        assert results["ilp"][0] <= results[heuristic][0], heuristic
    assert results["ilp-bytes"][1] <= results["ilp"][1]


class HurriedIlp(IlpLayout):
    """The ILP with no time to prove anything."""

    time_limit_seconds = 1e-6


@pytest.mark.slow
def test_time_limit_returns_a_flagged_feasible_assignment():
    lowering = vulkan_lowering(pipeline("mobilevit_xs.unfused"))
    hurried = lowering.lower(HurriedIlp)
    validator.validate(hurried)
    summary = strategies.summarize(HurriedIlp, [p.layout_pass for p in hurried.partitions])
    assert summary["optimal"] is False
    assert summary["objective"] == len(metrics.transitions(hurried))
    optimum = lowering.lower(strategies.get_strategy("ilp"))
    assert summary["bound"] <= len(metrics.transitions(optimum)) <= summary["objective"]
