"""Metric definitions: texture padding, transition identity, memory accounting."""

import pytest
from executorch.backends.vulkan.serialization.vulkan_graph_schema import VkMemoryLayout, VkStorageType
from executorch.exir.dialects._ops import ops as exir_ops

import strategies
from harness.targets.vulkan.compile import metrics
from harness.pipeline.model import pipeline
from harness.targets.vulkan.compile.prefix import vulkan_lowering
from tests.helpers.tables import TRANSITIONS_ONLY

TEXTURE, BUFFER = VkStorageType.TEXTURE_3D, VkStorageType.BUFFER
W, C = VkMemoryLayout.TENSOR_WIDTH_PACKED, VkMemoryLayout.TENSOR_CHANNELS_PACKED


@pytest.mark.parametrize(
    "dims, storage, layout, expected",
    [
        ([1, 3, 5, 5], TEXTURE, C, 5 * 5 * 1 * 4 * 4),  # 3 channels padded to 4
        ([1, 3, 5, 5], TEXTURE, W, 2 * 5 * 3 * 4 * 4),  # width 5 padded to 8
        ([1, 3, 5, 5], BUFFER, C, 75 * 4),  # buffers are not padded
        ([2, 8, 4, 4], TEXTURE, C, 4 * 4 * (2 * 2) * 4 * 4),  # batch folds into depth
    ],
)
def test_tensor_bytes_include_texture_padding(dims, storage, layout, expected):
    assert metrics.tensor_bytes(dims, 4, storage, layout) == expected


def test_transitions_are_exactly_the_clones_the_pass_added():
    lowering = vulkan_lowering(pipeline("synthetic_small"))
    for name in strategies.list_strategies():
        lowered = lowering.lower(strategies.get_strategy(name), TRANSITIONS_ONLY)
        found = metrics.transitions(lowered)
        for partition, prefix in zip(lowered.partitions, lowering.prefixes):
            clones = lambda graph: [n for n in graph.nodes if n.target == exir_ops.edge.aten.clone.default]  # noqa: E731
            added = len(clones(partition.program.graph)) - len(clones(prefix.program.graph))
            assert added == sum(1 for t in found if t.partition == lowering.prefixes.index(prefix))
        for transition in found:
            assert transition.before != transition.after
            assert transition.bytes > 0 and transition.consumers


@pytest.mark.slow  # lowers a full-size model, which a slow test lowers first
def test_memory_counts_transitions_no_more_than_total():
    lowered = vulkan_lowering(pipeline("mobilevit_xs.unfused")).lower(strategies.get_strategy("all-width-packed"))
    memory = metrics.delegate_memory(lowered)
    assert 0 < memory.transition_bytes < memory.total_bytes


def test_metrics_are_deterministic():
    lowering = vulkan_lowering(pipeline("synthetic_small"))
    bfs = strategies.get_strategy("bfs-downstream")
    first, second = lowering.lower(bfs), lowering.lower(bfs)
    assert metrics.transitions(first) == metrics.transitions(second)
    assert metrics.delegate_memory(first) == metrics.delegate_memory(second)
