"""Checks that a strategy's assignment is one ET-VK can run.

Independently of how a strategy decided, every delegated operator must receive, on every
non-constant tensor argument and output, a representation its ``OpRepSets`` accept; tensors its
registration synchronises must share packed-dim info (storage type and packed dim for float
tensors: the pinned pass's meaning of "synced"); no float tensor may be tagged with a
PACKED_INT8 layout (agnostic ops' OpRepSets offer those to any tensor).
"""

import operator

import executorch.backends.vulkan.utils as vk_utils
import torch
from executorch.backends.vulkan.op_registry import get_op_features, has_impl

from costmodel.fx import node_values
from harness.errors import InvalidAssignmentError
from harness.targets.vulkan.compile.lowering import LoweredProgram
from harness.targets.vulkan.compile.metrics import is_transition
from strategies.representations import as_pair, layouts_for, node_reprs, packed_dim_info, repr_name


def _is_tagged_tensor(node) -> bool:
    return isinstance(node, torch.fx.Node) and vk_utils.is_tensor_node(node) and not node.meta.get("etvk_tensorref")


def _packed_dim_info(representation: vk_utils.TensorRepr):
    return packed_dim_info(as_pair(representation))


def _fail(node, what: str, got, accepted) -> InvalidAssignmentError:
    return InvalidAssignmentError(f"{node.name} ({node.target}): {what} got {got}, accepts {accepted}")


def _check_dtype(node: torch.fx.Node) -> None:
    for val, representation in zip(node_values(node), node_reprs(node)):
        if representation is not None and representation.memory_layout not in layouts_for(val.dtype):
            raise _fail(node, f"{val.dtype} tensor", repr_name(representation), "a layout for its dtype")


def _check_op(node: torch.fx.Node, texture_limits) -> None:
    repsets = get_op_features(node.target).make_op_repsets(node, texture_limits)
    arg_reprs: dict[int, list] = {}
    for i, arg in enumerate(node.args):
        tensors = arg if isinstance(arg, (list, tuple)) else [arg]
        if not tensors or not all(_is_tagged_tensor(t) for t in tensors):
            continue
        accepted = repsets.get_arg_repset(i)
        arg_reprs[i] = [vk_utils.get_node_repr(t) for t in tensors]
        for tensor, representation in zip(tensors, arg_reprs[i]):
            if representation is None or not accepted.is_compatible(representation):
                got = "no representation" if representation is None else repr_name(representation)
                raise _fail(node, f"argument {i} ({tensor.name})", got, accepted)

    out_reprs = node_reprs(node)
    for k, representation in enumerate(out_reprs):
        accepted = repsets.get_out_repset(k)
        if representation is None or not accepted.is_compatible(representation):
            raise _fail(node, f"output {k}", representation and repr_name(representation), accepted)

    if repsets.sync_args_repr:
        infos = {_packed_dim_info(r) for reprs in arg_reprs.values() for r in reprs}
        if len(infos) > 1:
            got = {i: [repr_name(r) for r in reprs] for i, reprs in arg_reprs.items()}
            raise _fail(node, "synced arguments", got, "one packed-dim info for all")
    primary = repsets.primary_arg_idx
    if repsets.sync_primary_io_repr and primary in arg_reprs:
        if _packed_dim_info(arg_reprs[primary][0]) != _packed_dim_info(out_reprs[0]):
            got = f"{repr_name(arg_reprs[primary][0])} in, {repr_name(out_reprs[0])} out"
            raise _fail(node, "primary input and output", got, "the same packed-dim info")


def validate(lowered: LoweredProgram) -> int:
    """Raise InvalidAssignmentError at the first violation; returns the number of operators checked."""
    checked = 0
    for partition, node in ((p, node) for p in lowered.partitions for node in p.program.graph.nodes):
        if (node.op != "call_function" or not _is_tagged_tensor(node) or not has_impl(node.target)
                or is_transition(node, partition.prefix_node_names)):
            continue
        if node.target == operator.getitem:
            source_reprs = node_reprs(node.args[0])
            if vk_utils.get_node_repr(node) != source_reprs[node.args[1]]:
                raise _fail(node, "getitem", node_reprs(node), source_reprs[node.args[1]])
            continue
        _check_dtype(node)
        _check_op(node, partition.texture_limits)
        checked += 1
    return checked
