"""``bfs-refined``: never worse than the pass it refines, close to the optimum, deterministic."""

import executorch.backends.vulkan.utils as vk_utils
import pytest

import strategies
from harness.targets.vulkan.compile import metrics, validator
from strategies.bfs_refined import BfsRefined
from strategies.ilp import partition_problems
from strategies.objective import TransitionCount

from .helpers import exhaustive
from .conftest import QUICK_ZOO, fast_on_the_small_model
from .test_ilp import RANDOM_GRAPHS
from harness.pipeline.model import pipeline
from harness.targets.vulkan.compile.prefix import vulkan_lowering


def _lower(model, name):
    lowered = vulkan_lowering(pipeline(model)).lower(strategies.get_strategy(name))
    validator.validate(lowered)
    return lowered


@pytest.mark.slow
def test_quick_zoo_never_worse_than_bfs_and_within_5_percent_of_the_ilp():
    totals = {"bfs-downstream": 0, "bfs-refined": 0, "ilp": 0}
    for model in QUICK_ZOO:
        counts = {name: len(metrics.transitions(_lower(model, name))) for name in totals}
        assert counts["ilp"] <= counts["bfs-refined"] <= counts["bfs-downstream"], model
        for name, count in counts.items():
            totals[name] += count
    assert totals["bfs-refined"] <= 1.05 * totals["ilp"], totals
    assert totals["bfs-refined"] < totals["bfs-downstream"], "the quick zoo must show a gain"


@pytest.mark.slow
def test_reports_the_pass_it_started_from():
    refined = _lower("mobilevit_xs.unfused", "bfs-refined")
    summary = strategies.summarize(BfsRefined, [p.layout_pass for p in refined.partitions])
    bfs = _lower("mobilevit_xs.unfused", "bfs-downstream")
    assert summary["bfs_transitions"] == len(metrics.transitions(bfs)) == 11
    assert len(metrics.transitions(refined)) == 7


def _between_the_optimum_and_bfs(graphs: list[str]) -> int:
    """Asserts bfs-refined's count lies between the optimum and bfs-downstream's on each graph;
    on how many it is the optimum."""
    matched = 0
    for name in graphs:
        refined = _lower(name, "bfs-refined")
        count = len(metrics.transitions(refined))
        optimum = sum(exhaustive.optimum(TransitionCount(p))
                      for p in partition_problems(vulkan_lowering(pipeline(name)).programs))
        bfs = sum(p.layout_pass.bfs_transitions for p in refined.partitions)
        assert optimum <= count <= bfs, name
        matched += count == optimum
    return matched


@pytest.mark.slow
def test_random_graphs_between_the_optimum_and_bfs():
    assert _between_the_optimum_and_bfs(RANDOM_GRAPHS) >= 0.9 * len(RANDOM_GRAPHS)


def test_two_random_graphs_between_the_optimum_and_bfs():
    """The test above on its first two graphs."""
    assert _between_the_optimum_and_bfs(RANDOM_GRAPHS[:2]) >= 0.9 * 2


@pytest.mark.parametrize("model", fast_on_the_small_model(["synthetic_small", "mobilevit_xs.unfused"]))
def test_deterministic(model):
    def assignment():
        lowered = _lower(model, "bfs-refined")
        tagged = []
        for partition in lowered.partitions:
            for node in partition.program.graph.nodes:
                if vk_utils.has_node_spec_attr(node, "etvk_node_repr"):
                    reprs = vk_utils.get_node_repr(node)
                    reprs = reprs if isinstance(reprs, list) else [reprs]
                    tagged.append((node.name, str(node.args), [metrics.repr_name(r) for r in reprs]))
        return tagged

    assert assignment() == assignment()
