"""What a strategy did to one model: transitions, the bytes they move, delegate memory.

Transitions are the ``clone`` nodes the layout pass added: clones whose names were not in
the partition's graph before the pass (a model's own clones were). Memory comes from the
values ``VkGraphBuilder`` serialized, i.e. what the ET-VK runtime allocates.
"""

import operator
from dataclasses import dataclass

import executorch.backends.vulkan.utils as vk_utils
import torch
from executorch.backends.vulkan.serialization.vulkan_graph_schema import VkMemoryLayout, VkStorageType, VkTensor
from executorch.exir.dialects._ops import ops as exir_ops

from costmodel.device_limits import DeviceLimits
from costmodel.prediction import Prediction
from costmodel.queries import pair_name
from costmodel.fx import dtype_name, node_values
from costmodel.table import CostTable
from harness.targets.vulkan.compile.lowering import LoweredPartition, LoweredProgram, VulkanLowering
from strategies.assignment import Assignment
from strategies.layout_problem import extract
from strategies.representations import (QUANTIZED_DTYPES, element_bytes, first_repr, image_extents, repr_name,
                                         tensor_bytes)


@dataclass(frozen=True)
class Transition:
    """One clone the layout pass inserted."""

    partition: int
    node: str
    source: str
    consumers: tuple[str, ...]
    before: str
    after: str
    shape: tuple[int, ...]
    dtype: str
    bytes: int

    @property
    def quantized(self) -> bool:
        """A transition of an int8 tensor, not a float clone."""
        return self.dtype in {dtype_name(d) for d in QUANTIZED_DTYPES}


def precision(lowering: VulkanLowering) -> str:
    """``int8`` for a program that computes on int8 tensors (a quantized model), ``float16``
    for one ET-VK computes in half precision (``force_fp16``: its inputs and outputs stay as
    they are), else the dtype of its first floating-point input (``float32`` for the zoo's
    models)."""
    if any(spec.key == "force_fp16" and any(spec.value) for prefix in lowering.prefixes
           for spec in prefix.compile_specs):
        return "float16"
    programs = [lowering.edge_manager.exported_program(), *lowering.programs]
    if any(isinstance(v, torch.Tensor) and v.dtype in QUANTIZED_DTYPES
           for program in programs for node in program.graph.nodes
           if node.op == "call_function" and "val" in node.meta for v in node_values(node)):
        return "int8"
    inputs = [node.meta["val"] for node in programs[0].graph.nodes
              if node.op == "placeholder" and node.name in programs[0].graph_signature.user_inputs]
    return next((dtype_name(v.dtype) for v in inputs
                 if isinstance(v, torch.Tensor) and v.is_floating_point()), "float32")


def _is_clone(node: torch.fx.Node) -> bool:
    return node.op == "call_function" and node.target == exir_ops.edge.aten.clone.default


def is_transition(node: torch.fx.Node, prefix_node_names: frozenset) -> bool:
    return _is_clone(node) and node.name not in prefix_node_names


def own_clone_count(lowered: LoweredProgram) -> int:
    """Clones the model itself has inside the delegate (not transitions)."""
    return sum(_is_clone(node) and node.name in p.prefix_node_names
               for p in lowered.partitions for node in p.program.graph.nodes)


def partition_transitions(index: int, partition: LoweredPartition) -> list[Transition]:
    found = []
    for node in partition.program.graph.nodes:
        if not is_transition(node, partition.prefix_node_names):
            continue
        source, after, val = node.args[0], vk_utils.get_node_repr(node), node.meta["val"]
        nbytes = tensor_bytes(list(val.shape), element_bytes(val.dtype, partition.layout_pass.force_fp16),
                              after.storage_type, after.memory_layout)
        found.append(Transition(index, node.name, source.name, tuple(u.name for u in node.users),
                                repr_name(first_repr(source)), repr_name(after), tuple(val.shape),
                                dtype_name(val.dtype), nbytes))
    return found


def transitions(lowered: LoweredProgram) -> list[Transition]:
    """Every transition of every partition, in graph order."""
    return [t for i, p in enumerate(lowered.partitions) for t in partition_transitions(i, p)]


def _serialized_tensors(partition: LoweredPartition) -> dict[int, VkTensor]:
    """Non-constant tensor values of the serialized graph, by value id."""
    return {value_id: value.value for value_id, value in enumerate(partition.builder.values)
            if isinstance(value.value, VkTensor) and value.value.constant_id < 0}


def _representation(tensor: VkTensor) -> tuple[VkStorageType, VkMemoryLayout]:
    """The storage and layout the runtime gives a serialized tensor."""
    storage, layout = tensor.storage_type, tensor.memory_layout
    # DEFAULT_* means "the graph's default", which preprocess sets to width-packed texture.
    if storage == VkStorageType.DEFAULT_STORAGE:
        storage = VkStorageType.TEXTURE_3D
    if layout == VkMemoryLayout.DEFAULT_LAYOUT:
        layout = VkMemoryLayout.TENSOR_WIDTH_PACKED
    return storage, layout


def _allocation_bytes(tensor: VkTensor) -> int:
    # VkDataType's names are torch's dtype names in capitals (FLOAT16: torch.float16).
    return tensor_bytes(tensor.dims, getattr(torch, tensor.datatype.name.lower()).itemsize, *_representation(tensor))


def _memory_bytes(tensors: dict[int, VkTensor], excluded: set[int]) -> int:
    """Shared memory objects at the size of their largest tensor, others individually."""
    shared: dict[int, int] = {}
    own = 0
    for value_id, tensor in tensors.items():
        size = 0 if value_id in excluded else _allocation_bytes(tensor)
        if tensor.mem_obj_id >= 0:
            shared[tensor.mem_obj_id] = max(shared.get(tensor.mem_obj_id, 0), size)
        else:
            own += size
    return own + sum(shared.values())


@dataclass(frozen=True)
class DelegateMemory:
    total_bytes: int
    transition_bytes: int  # what the total would shrink by if transitions took no memory


def delegate_memory(lowered: LoweredProgram) -> DelegateMemory:
    total = without_transitions = 0
    for partition in lowered.partitions:
        tensors = _serialized_tensors(partition)
        transition_ids = {value_id for node, value_id in partition.builder.node_to_value_ids.items()
                          if isinstance(value_id, int) and is_transition(node, partition.prefix_node_names)}
        total += _memory_bytes(tensors, set())
        without_transitions += _memory_bytes(tensors, transition_ids)
    return DelegateMemory(total, total - without_transitions)


def delegate_op_count(lowered: LoweredProgram) -> int:
    """Operators dispatched inside the delegates (transitions included)."""
    return sum(n.op == "call_function" and n.target != operator.getitem
               for p in lowered.partitions for n in p.program.graph.nodes)


def assignments(lowered: LoweredProgram) -> list[Assignment]:
    """Per partition: the assignment the strategy left on it, of the layout problem the pass faced."""
    found = []
    for partition in lowered.partitions:
        graph_module = partition.program.graph_module
        inserted = frozenset(n.name for n in graph_module.graph.nodes if is_transition(n, partition.prefix_node_names))
        found.append(Assignment.read(extract(partition.layout_pass, graph_module, inserted), graph_module))
    return found


def predicted_gpu_time(lowered: LoweredProgram, table: CostTable) -> dict:
    """The program's GPU time per inference under a cost table (``predicted_gpu_ms``): every
    operator node in the representations the strategy gave it, plus its transitions (ET-VK's
    copies of inputs and outputs aside); the share priced by nodes measured on this very model
    and the time per operator (where two strategies' times differ). Under a fit's table (support
    and intervals): the fitted time outside the support per kernel family and its share, the
    interval at the table's level, and the bounds of the ratio of a measured change against the
    reference strategy to the predicted one."""
    prediction = Prediction()
    for assignment in assignments(lowered):
        prediction += assignment.prediction(table)
    stated = {
        "predicted_gpu_ms": prediction.ms,
        "predicted_measured_share": prediction.measured_ms / prediction.ms if prediction.ms else None,
        "predicted_gpu_ms_by_operator": {op: round(ms, 6) for op, ms in sorted(prediction.by_operator.items())},
    }
    if table.support is not None:
        stated["predicted_outside_support"] = {f: round(ms, 6) for f, ms in sorted(prediction.outside.items())}
        stated["predicted_outside_support_share"] = prediction.outside_ms / prediction.ms if prediction.ms else None
    if table.intervals is not None:
        stated["predicted_gpu_ms_low"], stated["predicted_gpu_ms_high"] = prediction.interval(table.intervals)
        stated["predicted_interval_level"] = table.intervals.level
        stated["predicted_ratio_low"], stated["predicted_ratio_high"] = table.intervals.change.of(1.0)
    return stated


def limit_violations(lowered: LoweredProgram, limits: DeviceLimits) -> dict:
    """The program's tensors as the runtime allocates them (constants aside: their operators
    choose how to prepack them) that break a device's ``limits``: a texture's image extents (its
    packed dim divided by its block) over the largest image, a buffer's bytes over the largest
    storage buffer. ``limit_violations``: how many; ``worst_limit_violation``: the one furthest
    over its limit (the first in program order of those as far), in words (None where none is)."""
    found = []
    for index, partition in enumerate(lowered.partitions):
        names = {value_id: node.name for node, value_id in partition.builder.node_to_value_ids.items()
                 if isinstance(value_id, int)}
        for value_id, tensor in _serialized_tensors(partition).items():
            storage, layout = _representation(tensor)
            extents = image_extents(tensor.dims, layout) if storage != VkStorageType.BUFFER else ()
            nbytes = _allocation_bytes(tensor)
            if broken := limits.exceeded(storage.name, extents, nbytes):
                name, limit, times_over = broken
                tensor_name = f"partition {index} {names.get(value_id, f'value {value_id}')}"
                size = f"image {'x'.join(map(str, extents))}" if extents else f"{nbytes} bytes"
                found.append((times_over, f"{tensor_name} {pair_name((storage, layout))} {list(tensor.dims)}: "
                                          f"{size} > {name} {limit}"))
    worst = max(found, key=lambda violation: violation[0])[1] if found else None
    return {"limit_violations": len(found), "worst_limit_violation": worst}
