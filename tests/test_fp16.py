"""The ``.fp16`` variant: the model as it is, computed by ET-VK in half precision; its
transitions counted at the bytes its delegate moves, two an element."""

import math
from types import SimpleNamespace

import pytest
import torch
from executorch.backends.vulkan.serialization.vulkan_graph_builder import VkGraphBuilder
from executorch.backends.vulkan.serialization.vulkan_graph_serialize import (
    extract_vk_flatbuffer,
    flatbuffer_to_vk_graph,
)

import models
import strategies
from harness.errors import UnknownNameError
from harness.pipeline.model import pipeline
from harness.results.store import RecordStore
from harness.sweep.execution import Execution
from harness.sweep.planning import run_sweep
from harness.targets import MeasureContext
from harness.targets.vulkan.compile import metrics
from harness.targets.vulkan.compile.prefix import vulkan_lowering
from harness.targets.vulkan.local.dispatches import node_map, serialized_calls
from strategies.representations import element_bytes, tensor_bytes


def test_a_half_precision_variant_is_its_model_with_half_the_delegate_s_memory(tmp_path):
    assert models.half_precision("synthetic_small.fp16") and not models.half_precision("synthetic_small")
    half, full = models.create("synthetic_small.fp16"), models.create("synthetic_small")
    assert half.name == "synthetic_small.fp16" and half.input_shapes == full.input_shapes
    assert all((a == b).all() for a, b in zip(half.module.state_dict().values(), full.module.state_dict().values()))
    done = run_sweep(["synthetic_small", "synthetic_small.fp16"], ["bfs-downstream"], ["vulkan"],
                     RecordStore(tmp_path), context=MeasureContext(tmp_path), execution=Execution(workers=0))
    by_model = {record["model"]: record for record in done.records}
    assert [by_model[m]["status"] for m in by_model] == ["ok", "ok"]
    assert by_model["synthetic_small.fp16"]["precision"] == "float16"
    assert by_model["synthetic_small"]["precision"] == "float32"
    # the same layouts, each tensor in two bytes an element instead of four
    assert by_model["synthetic_small.fp16"]["transitions"] == by_model["synthetic_small"]["transitions"]
    assert by_model["synthetic_small.fp16"]["delegate_memory_bytes"] * 2 == by_model["synthetic_small"][
        "delegate_memory_bytes"]


def test_the_half_precision_corpus_is_the_float_corpus():
    corpus, half = models.list_models(zoo="calibration"), models.list_models(zoo="calibration-fp16")
    assert sorted(half) == sorted(name + ".fp16" for name in corpus if not name.endswith(".int8"))
    with pytest.raises(UnknownNameError):  # int8 or half precision, not both
        models.create("resnet18.int8.fp16")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64, torch.int64, torch.int32, torch.int8,
                                   torch.uint8, torch.bool])
@pytest.mark.parametrize("force_fp16", [False, True])
def test_an_element_takes_the_bytes_of_the_dtype_et_vk_serializes_it_as(dtype, force_fp16):
    # ExecuTorch's own rule, on a builder of the options vulkan_preprocess gives it by default
    serialized = VkGraphBuilder.get_effective_dtype(SimpleNamespace(downcast_64_bit=True, force_fp16=force_fp16),
                                                    dtype)
    assert element_bytes(dtype, force_fp16) == serialized.itemsize


def serialized_transitions(lowered) -> dict:
    """Per transition (partition, node): the bytes its output takes as the delegate's serialized
    graph (decoded from the payload) declares it, padded as its representation pads, and unpadded."""
    found = {}
    for index, partition in enumerate(lowered.partitions):
        graph = flatbuffer_to_vk_graph(extract_vk_flatbuffer(partition.result.processed_bytes))
        outputs = {call.node_id: call.args[-1] for call in graph.chain}
        for node_id, node in enumerate(serialized_calls(partition)):
            if metrics.is_transition(node, partition.prefix_node_names):
                tensor = graph.values[outputs[node_id]].value
                size = getattr(torch, tensor.datatype.name.lower()).itemsize
                found[(index, node.name)] = (tensor_bytes(tensor.dims, size, tensor.storage_type, tensor.memory_layout),
                                             math.prod(tensor.dims) * size)
    return found


@pytest.mark.parametrize("strategy", ["bfs-downstream", "ilp-bytes"])
def test_a_half_precision_program_s_transitions_count_the_bytes_its_delegate_moves(strategy):
    """transition_bytes, the node map's bytes (what the dispatch reader reads) and ilp-bytes'
    objective, against the serialized graph: two bytes an element, not the exported program's four."""
    strategy_cls = strategies.get_strategy(strategy)
    lowered = vulkan_lowering(pipeline("synthetic_small.fp16")).lower(strategy_cls)
    serialized = serialized_transitions(lowered)
    counted = {(t.partition, t.node): t.bytes for t in metrics.transitions(lowered)}
    assert counted and counted == {key: padded for key, (padded, _) in serialized.items()}
    mapped = {(p["partition"], n["node"]): n["bytes"] for p in node_map(lowered)["partitions"] for n in p["nodes"]
              if n["transition"]}
    assert mapped == {key: unpadded for key, (_, unpadded) in serialized.items()}
    if strategy == "ilp-bytes":
        summary = strategies.summarize(strategy_cls, [p.layout_pass for p in lowered.partitions])
        assert summary["objective"] == sum(counted.values())
