"""Where an ET-VK run's GPU time went: every dispatch of an ETDump, joined by delegate node
id to the graph node it ran for.

ET-VK names each dispatch event with JSON: the operator's name, its ``delegate_node_id``
(VkGraphBuilder numbers the operator calls it serializes from 0, in graph order, getitem
aside), the kernel and a dispatch id. Each delegate call has its own numbering, and the
Inspector tells the calls apart by their instruction id. A *node map* written when a
program is made (:func:`node_map`) says, per partition in execution order and node id,
which graph node that is, whether the layout pass inserted it (a transition: the strategy's
clones, not the model's own), the representations of its tensor inputs and output and its
output's elements and bytes; each partition also carries its graph's digest, by which cost
tables know its nodes (:func:`costmodel.fx.graph_digest`). With it, an ETDump is attributed
without the lowered program at hand, also one that came back from another machine.
"""

import json
import operator
import statistics
from pathlib import Path
from typing import TYPE_CHECKING

import executorch.backends.vulkan.utils as vk_utils
import torch

from costmodel.fx import graph_digest, node_values, signature
from costmodel.signatures import op_name
from harness.results.results_dir import ResultsDir
from harness.targets.vulkan.compile.lowering import LoweredPartition, LoweredProgram
from harness.targets.vulkan.compile.metrics import is_transition
from strategies.representations import element_bytes, first_repr, repr_name

if TYPE_CHECKING:
    import pandas as pd

STAGING = "staging"  # ET-VK's copies of inputs and outputs between the caller and the delegate
# The shaders of those copies (ComputeGraph's input and output staging; StagingUtils.cpp).
# ET-VK names a dispatch with the operator last built in the process, so a copy carries the
# operator before it: the last of its own graph (outputs), or of the graph built before (inputs).
STAGING_KERNELS = ("nchw_to_image", "nchw_to_buffer", "nchw_to_bitw8_image", "image_to_nchw", "buffer_to_nchw",
                   "bitw8_image_to_nchw")
DISPATCH_COLUMNS = ("partition", "graph", "node_id", "node", "operator", "kernel", "transition", "inputs", "output",
                    "elements", "bytes", "gpu_ms")


def serialized_calls(partition: LoweredPartition) -> list[torch.fx.Node]:
    """The graph nodes a partition's delegate runs, indexed by delegate node id."""
    graph = partition.builder.program.graph_module.graph
    calls = [n for n in graph.nodes if n.op == "call_function" and n.target != operator.getitem]
    serialized = [call.name for call in partition.builder.chain]
    if [op_name(n.target) for n in calls] != serialized:
        raise AssertionError("VkGraphBuilder's operator calls are not the graph's call nodes in order")
    return calls


def _node_entry(node: torch.fx.Node, partition: LoweredPartition) -> dict:
    """What a node map says of one node: its tensor inputs are the activations it reads (weights
    are prepacked by the operator), its bytes its outputs' as the program stores them (no
    texture padding)."""
    inputs = [arg for arg in node.all_input_nodes
              if not vk_utils.is_param_node(partition.builder.program, arg) and first_repr(arg) is not None]
    outputs = [value for value in node_values(node) if isinstance(value, torch.Tensor)]
    force_fp16 = partition.layout_pass.force_fp16
    return {"node": node.name, "operator": op_name(node.target),
            "transition": is_transition(node, partition.prefix_node_names),
            "inputs": [repr_name(first_repr(arg)) for arg in inputs],
            "output": repr_name(first_repr(node)) if first_repr(node) is not None else None,
            "elements": sum(value.numel() for value in outputs),
            "bytes": sum(value.numel() * element_bytes(value.dtype, force_fp16) for value in outputs),
            "signature": signature(node)}


def node_map(lowered: LoweredProgram) -> dict:
    """What each delegate node id of each partition is, as JSON-ready data."""
    calls = [(index, lowered.partitions[index]) for index in lowered.lowering.call_order]
    return {"partitions": [
        {"partition": index, "graph": graph_digest(lowered.lowering.prefixes[index].program.graph_module),
         "nodes": [_node_entry(node, partition) for node in serialized_calls(partition)]}
        for index, partition in calls]}


def _dispatch_event(name: str) -> dict | None:
    """The JSON ET-VK names a dispatch event with, or None for other events."""
    try:
        event = json.loads(name)
    except (TypeError, ValueError):
        return None
    return event if isinstance(event, dict) and "kernel_name" in event else None


def read_dispatches(etdump: Path, nodes: dict) -> "pd.DataFrame":
    """One row per GPU dispatch of one inference: the node it ran for (``nodes``, a node map)
    and its GPU time, the median over the inferences the ETDump holds. Input and output copies
have no node: their operator is ``staging``."""
    # Imported here, not at the top: every sweep's worker imports this module, few read ETDumps.
    import pandas as pd
    from executorch.devtools import Inspector

    events = [
        (event._instruction_id, dispatch, event.perf_data.raw)
        for block in Inspector(etdump_path=str(etdump)).event_blocks
        for event in block.events
        if event.perf_data is not None and (dispatch := _dispatch_event(event.name)) is not None
    ]
    calls = sorted({instruction for instruction, _, _ in events})
    if len(calls) != len(nodes["partitions"]):
        raise ValueError(f"{etdump} has dispatches of {len(calls)} delegate calls; the program has "
                         f"{len(nodes['partitions'])} partitions: is it this program's ETDump?")
    rows = []
    for instruction, dispatch, times in events:
        call = calls.index(instruction)
        partition = nodes["partitions"][call]
        row = {"partition": partition["partition"], "graph": partition.get("graph"), "kernel": dispatch["kernel_name"],
               "transition": False, "gpu_ms": float(statistics.median(times))}
        if "operator" not in dispatch or dispatch["kernel_name"].startswith(STAGING_KERNELS):
            # Copies between the caller's tensors and the delegate's, in and out: no node's.
            rows.append({**row, "node_id": None, "node": dispatch["kernel_name"], "operator": STAGING,
                         "inputs": "", "output": None, "elements": 0, "bytes": 0})
            continue
        node_id = dispatch["operator"]["delegate_node_id"]
        node = partition["nodes"][node_id]
        if node["operator"] != dispatch["operator"]["name"]:
            raise ValueError(f"{etdump}: node {node_id} of delegate call {call} is {dispatch['operator']['name']} "
                             f"in the ETDump but {node['operator']} in the program: is it this program's ETDump?")
        rows.append({**row, "node_id": node_id, "node": node["node"], "operator": node["operator"],
                     "transition": node["transition"], "inputs": ", ".join(node["inputs"]),
                     "output": node["output"], "elements": node["elements"], "bytes": node.get("bytes")})
    return pd.DataFrame(rows, columns=list(DISPATCH_COLUMNS))


GPU_FIELDS = ("gpu_dispatch_ms", "transition_gpu_ms", "transition_time_share", "staging_gpu_ms")


def attributed_gpu_fields(etdump: Path, nodes: dict) -> dict:
    """:func:`gpu_summary` of an ETDump's dispatches; where they cannot be attributed to the
    program's nodes, no GPU time and ``attribution_error`` saying why (the run's latency,
    read from the same ETDump's events, stands)."""
    try:
        return {**gpu_summary(read_dispatches(etdump, nodes)), "attribution_error": None}
    except ValueError as error:
        return {**dict.fromkeys(GPU_FIELDS), "attribution_error": str(error)}


def gpu_summary(frame: "pd.DataFrame") -> dict:
    """Record fields of one run's dispatches: their summed GPU time, the transitions' share,
    and the copies of inputs and outputs (what a cost table's prediction leaves out)."""
    total = float(frame["gpu_ms"].sum())
    transitions = float(frame.loc[frame["transition"], "gpu_ms"].sum())
    return {
        "gpu_dispatch_ms": total,
        "transition_gpu_ms": transitions,
        "transition_time_share": transitions / total if total else None,
        "staging_gpu_ms": float(frame.loc[frame["operator"] == STAGING, "gpu_ms"].sum()),
    }


def prediction_error(fields: dict) -> float | None:
    """How far a record's predicted GPU time is from what its run measured, as a fraction:
    the prediction covers operators and transitions, so ET-VK's copies of inputs and outputs
    are left out of the measured side too. None where either is missing."""
    predicted, measured = fields.get("predicted_gpu_ms"), fields.get("gpu_dispatch_ms")
    if predicted is None or measured is None:
        return None
    return predicted / (measured - fields["staging_gpu_ms"]) - 1


def read_node_map(path: Path) -> dict:
    return json.loads(ResultsDir.beside(path, "node_map").read_text())


def program_dispatches(path: Path):
    """The dispatches of the program at ``path``, from the ETDump and node map kept beside it."""
    return read_dispatches(ResultsDir.beside(path, "etdump"), read_node_map(path))
