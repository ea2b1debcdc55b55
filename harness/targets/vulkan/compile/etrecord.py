"""A model's edge program before delegation, as an ETRecord that Model Explorer's ETRecord
adapter (``executorch-extension-model-explorer``) draws, and the table of its nodes that
tells where a lowered program's nodes are in that drawing.

The edge program is the one ``to_edge_transform_and_lower`` hands ET-VK's partitioner (its
first step, ``_gen_edge_manager_for_partitioners``, on the same exported program, without
lowering again). The partitions' graphs keep its node names, so each delegated node is found
by name, and a node ET-VK's passes made (a linear fused from a permute and an addmm) by the
torch call it came from.

The ETRecord holds the edge program alone, not the exported program before it: reading the
other's weights too made the adapter's conversion of a ViT take 3.0 s instead of 2.3. It has
no delegate map: with one the adapter puts every delegated node in one flat
``delegates/VulkanBackend`` layer, without it nodes nest by the model's modules.
``ETRecord.save`` asks for a debug handle map: the reference lowering's. Kept on disk as a
stage of the model pipeline (kind ``etrecords``): the edge program costs seconds to a minute.
"""

import copy
import hashlib
import io
import pickle
import sys
from dataclasses import dataclass

from executorch.backends.vulkan.partitioner.vulkan_partitioner import VulkanPartitioner
from executorch.devtools.etrecord import ETRecord
from executorch.exir import EdgeCompileConfig
from executorch.exir.program._program import _gen_edge_manager_for_partitioners

from costmodel.signatures import op_name
from harness.cache import DiskCache
from harness.pipeline.model import CachedStage, ModelPipeline
from harness.results.provenance import code_digest
from harness.targets.vulkan.compile.prefix import prefix_key, vulkan_lowering


@dataclass(frozen=True)
class EdgeNode:
    """A call of the edge program: its name, operator and the torch call it came from."""

    name: str
    operator: str
    torch_fn: str | None


@dataclass(frozen=True)
class EdgeGraph:
    """The ETRecord's bytes, its edge program's calls in graph order and its user inputs."""

    etrecord: bytes
    nodes: tuple[EdgeNode, ...]
    inputs: tuple[str, ...]


def _torch_fn(node) -> str | None:
    source = node.meta.get("torch_fn")
    return source[0] if source else None


def edge_graph(model: ModelPipeline) -> EdgeGraph:
    """The model's edge program before delegation, as an ETRecord and a table of its nodes."""
    manager = _gen_edge_manager_for_partitioners(
        {"forward": [VulkanPartitioner()]}, {"forward": copy.deepcopy(model.exported)}, EdgeCompileConfig(), None)
    edge = manager.exported_program()
    body = io.BytesIO()
    ETRecord(edge_dialect_program=edge,
             _debug_handle_map=vulkan_lowering(model).emitted.emitter_output.debug_handle_map).save(body)
    nodes = tuple(EdgeNode(n.name, op_name(n.target), _torch_fn(n)) for n in edge.graph.nodes
                  if n.op == "call_function")
    return EdgeGraph(body.getvalue(), nodes, tuple(edge.graph_signature.user_inputs))


def _key(name: str) -> str:
    return hashlib.sha256(f"{prefix_key(name)}|{code_digest(sys.modules[__name__])}".encode()).hexdigest()[:24]


EDGE_GRAPH = CachedStage("edge_graph", DiskCache("etrecords"), _key, edge_graph, pickle.dumps, pickle.loads,
                         "etrecord_load_seconds")


def model_edge_graph(model: ModelPipeline) -> EdgeGraph:
    """The model's :class:`EdgeGraph`, from the disk cache or made now."""
    return model.cached(EDGE_GRAPH)
