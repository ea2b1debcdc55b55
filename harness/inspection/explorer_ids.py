"""Where a lowered program's nodes are in the graph Model Explorer's ETRecord adapter draws
of the model's edge program before delegation (:mod:`harness.targets.vulkan.compile.etrecord`).

The adapter names a node as ExecuTorch's debug format does, the FX name and ``_``, in its
graph ``forward``; the user's inputs are one node, ``GraphInputs``. A node of a partition is
drawn as, in this order:

- the edge node of its name (most nodes: delegation keeps names); a ``getitem`` as the node
  whose output it takes (the adapter draws outputs on their node);
- one that ET-VK's passes made stands for the edge node it replaced: among the nodes of the
  same torch call that the partition no longer has, the one of its original operator (a
  linear fused from ``permute_copy`` and ``addmm`` is drawn as the ``addmm``), else the last;
- otherwise (a pass's clone, a squeeze of an unbind) the node it reads, as drawn;
- nothing where it reads only weights (ET-VK's prepacking, done once at load).
"""

import operator

import torch

from costmodel.signatures import op_name
from harness.targets.vulkan.compile.etrecord import EdgeGraph

GRAPH_ID = "forward"  # the adapter's id of the edge program's graph
INPUTS_ID = "GraphInputs"  # the adapter's one node for the user's inputs


def adapter_id(edge_name: str) -> str:
    """The adapter's id of an edge node (``executorch.devtools.debug_format.et_schema``'s name)."""
    return edge_name + "_"


def drawn_as(graph: torch.fx.Graph, edge: EdgeGraph) -> dict[str, str]:
    """The adapter's id of each node of a partition's graph that is drawn (module docstring)."""
    names, inputs, present = {node.name for node in edge.nodes}, set(edge.inputs), {node.name for node in graph.nodes}
    by_call: dict[str, list] = {}
    for node in edge.nodes:
        by_call.setdefault(node.torch_fn, []).append(node)
    ids: dict[str, str] = {}
    for node in graph.nodes:  # in graph order: what a node reads is placed before it
        if node.target == operator.getitem:
            if node.args[0].name in ids:
                ids[node.name] = ids[node.args[0].name]
        elif node.name in names:
            ids[node.name] = adapter_id(node.name)
        elif node.op == "placeholder":
            if node.name in inputs:
                ids[node.name] = INPUTS_ID
        elif node.op == "call_function":
            source, original = node.meta.get("torch_fn"), node.meta.get("original_aten")
            replaced = [e for e in by_call.get(source[0], []) if e.name not in present] if source else []
            same_operator = [e for e in replaced if original is not None and e.operator == op_name(original)]
            if replaced:
                ids[node.name] = adapter_id((same_operator or replaced)[-1].name)
                continue
            read = next((ids[arg.name] for arg in node.all_input_nodes if arg.name in ids), None)
            if read is not None:
                ids[node.name] = read
    return ids
