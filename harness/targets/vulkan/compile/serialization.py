"""A :class:`~harness.targets.vulkan.compile.lowering.VulkanLowering` to bytes and back, whole.

ExecuTorch's serializer of edge programs (``exir.serde``, ETRecord's) drops the node metadata
the layout pass, memory planning and ``VkGraphBuilder`` read (``spec``, ``etvk_tensorref`` ...);
plain pickle keeps it but fails on operator objects, fake tensors and FX graphs (which pickle
as code, dropping metadata). This pickler stores each of those by what identifies it:

- ATen, custom (``et_vk``) and higher-order operators, and their edge-dialect wrappers, by
  qualified name, looked up again on load (``EDGE_DO_NOT_DECOMP`` ones, which ExecuTorch
  defines during lowering, defined again the way it does);
- fake tensors (``meta["val"]``) by shape, stride, dtype, storage offset and device,
  recreated in one fake mode;
- FX graphs as their node table (name, op, target, arguments, metadata, type), and graph
  modules as that graph plus the attributes its nodes read;
- ExecuTorch's edge-dialect verifier class (a local class) by the configuration it closes over;
- CPU tensors by dtype, shape, stride and offset into their storage, and each storage once,
  as an out-of-band buffer (pickle protocol 5) laid 64-byte aligned after the pickle: a load
  makes tensors of those bytes in place (the prefix cache maps its entries) instead of copying
  the weights twice as torch's pickling does.

Everything else is pickled as it is. Tests check that every strategy's .pte from a loaded
lowering is byte-identical to one from a cold lowering.
"""

import inspect
import io
import operator
import pickle
import struct
from dataclasses import dataclass

import torch
from executorch.exir.dialects._ops import ops as exir_ops
from executorch.exir.dialects.edge._ops import EdgeOpOverload
from executorch.exir.program._program import _register_no_decomp_op, edge_no_decomp_namespace
from executorch.exir.verification.verifier import EXIREdgeDialectVerifier
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch.fx.node import map_aggregate, map_arg

_EDGE_VERIFIER = "EXIREdgeDialectVerifier.<locals>._EXIREdgeDialectVerifier"
BUFFER_ALIGNMENT = 64


@dataclass
class _NodeName:
    """A reference to a node of the graph being rebuilt."""

    name: str


def _split(qualified: str) -> tuple[str, str, str]:
    namespace, rest = qualified.split("::")
    name, _, overload = rest.partition(".")
    return namespace, name, overload or "default"


def _operator(qualified: str):
    namespace, name, overload = _split(qualified)
    if namespace == edge_no_decomp_namespace:
        # Defined on the fly by to_edge_transform_and_lower for the ATen op of the same
        # name (ops a partitioner keeps whole): define it again the same way.
        _register_no_decomp_op(getattr(getattr(torch.ops.aten, name), overload))
    return getattr(getattr(getattr(torch.ops, namespace), name), overload)


def _edge_operator(qualified: str):
    namespace, name, overload = _split(qualified)
    return getattr(getattr(getattr(exir_ops.edge, namespace), name), overload)


def _higher_order_operator(name: str):
    import executorch.exir.delegate  # noqa: F401  (registers executorch_call_delegate)

    return getattr(torch.ops.higher_order, name)


def _edge_verifier(config, exceptions: list, preserved: list):
    return EXIREdgeDialectVerifier(config, class_only=True, core_aten_ops_exception_list=list(exceptions),
                                   preserve_ops=list(preserved))


class _Loading:
    """The fake mode of one load: every fake tensor of a lowering lives in one mode."""

    mode: FakeTensorMode | None = None


def _fake_tensor(shape, stride, dtype, offset, device):
    if _Loading.mode is None:
        _Loading.mode = FakeTensorMode(allow_non_fake_inputs=True)
    # Wrapped directly around a meta tensor: creating it through the fake mode's dispatch
    # would take as long as the rest of a load.
    if not offset:
        meta = torch.empty_strided(shape, stride, dtype=dtype, device="meta")
    else:
        extent = offset + sum((size - 1) * step for size, step in zip(shape, stride)) + 1
        meta = torch.empty(extent, dtype=dtype, device="meta").as_strided(shape, stride, offset)
    return FakeTensor(_Loading.mode, meta, device)


@dataclass
class _Storage:
    """A tensor storage, pickled once however many tensors view it."""

    storage: torch.UntypedStorage


def _storage(buffer) -> torch.UntypedStorage:
    # torch.frombuffer refuses an empty buffer.
    return torch.frombuffer(buffer, dtype=torch.uint8).untyped_storage() if len(buffer) else torch.UntypedStorage(0)


def _tensor(storage: torch.UntypedStorage, dtype, size, stride, offset, requires_grad) -> torch.Tensor:
    tensor = torch.empty(0, dtype=dtype).set_(storage, offset, size, stride)
    return tensor.requires_grad_() if requires_grad else tensor


def _in_place(tensor) -> bool:
    """Whether a tensor is pickled by its storage (plain, dense, on the CPU, no extra state)."""
    return (type(tensor) is torch.Tensor and tensor.device.type == "cpu" and tensor.layout == torch.strided
            and not (tensor.is_quantized or tensor.is_conj() or tensor.is_neg() or tensor.grad_fn or tensor.__dict__))


def _graph(table: list, codegen) -> torch.fx.Graph:
    graph = torch.fx.Graph()
    graph._codegen = codegen
    nodes: dict = {}

    def resolved(value):  # a node reference resolved against the nodes rebuilt so far
        return nodes[value.name] if isinstance(value, _NodeName) else value

    for name, op, target, args, kwargs, meta, type_expr in table:
        node = graph.create_node(op, target, map_aggregate(args, resolved), map_aggregate(kwargs, resolved), name=name,
                                 type_expr=type_expr)
        if node.name != name:
            raise pickle.UnpicklingError(f"node {name} came back as {node.name}")
        node.meta = meta
        nodes[name] = node
    return graph


def _graph_module(attributes: dict, graph: torch.fx.Graph, class_name: str, meta: dict) -> torch.fx.GraphModule:
    module = torch.fx.GraphModule(attributes, graph, class_name)
    module.meta = meta
    return module


def _node_table(graph: torch.fx.Graph) -> list:
    def named(arguments):
        return map_arg(arguments, lambda node: _NodeName(node.name))

    return [(n.name, n.op, n.target, named(n.args), named(n.kwargs), n.meta, n.type) for n in graph.nodes]


def _attributes(module: torch.fx.GraphModule) -> dict:
    """The attributes the graph's get_attr and call_module nodes read, by qualified name."""
    return {node.target: operator.attrgetter(node.target)(module) for node in module.graph.nodes
            if node.op in ("get_attr", "call_module")}


class _ProgramPickler(pickle.Pickler):
    def __init__(self, file, buffers: list):
        super().__init__(file, protocol=5, buffer_callback=buffers.append)
        self._storages: dict = {}  # one _Storage per storage, so that tensors sharing one share it again

    def reducer_override(self, obj):
        if isinstance(obj, torch.Tensor) and _in_place(obj):
            storage = obj.untyped_storage()
            wrapper = self._storages.setdefault((storage.data_ptr(), storage.nbytes()), _Storage(storage))
            return _tensor, (wrapper, obj.dtype, tuple(obj.shape), obj.stride(), obj.storage_offset(),
                             obj.requires_grad)
        if isinstance(obj, _Storage):
            raw = torch.empty(0, dtype=torch.uint8).set_(obj.storage).numpy()
            return _storage, (pickle.PickleBuffer(raw),)
        if isinstance(obj, type) and obj.__qualname__ == _EDGE_VERIFIER:
            cells = inspect.getclosurevars(obj.__init__).nonlocals
            return _edge_verifier, (cells["edge_compile_config"], cells["_core_aten_ops_exception_list"],
                                    cells["_preserve_ops"])
        if isinstance(obj, EdgeOpOverload):
            return _edge_operator, (obj._op.name(),)
        if isinstance(obj, torch._ops.HigherOrderOperator):
            return _higher_order_operator, (obj.name(),)
        if isinstance(obj, torch._ops.OpOverload):
            return _operator, (obj.name(),)
        if isinstance(obj, FakeTensor):
            return _fake_tensor, (tuple(obj.shape), tuple(obj.stride()), obj.dtype, obj.storage_offset(), obj.device)
        if isinstance(obj, torch.fx.Graph):
            return _graph, (_node_table(obj), obj._codegen)
        if isinstance(obj, torch.fx.GraphModule):
            return _graph_module, (_attributes(obj), obj.graph, type(obj).__name__, obj.meta)
        return NotImplemented


def _aligned(position: int) -> int:
    return -(-position // BUFFER_ALIGNMENT) * BUFFER_ALIGNMENT


def dumps(value) -> bytearray:
    """The pickle's length and the buffers' count and lengths, the pickle, then each buffer
    at an aligned position."""
    stream, buffers = io.BytesIO(), []
    _ProgramPickler(stream, buffers).dump(value)
    raws = [buffer.raw() for buffer in buffers]
    out = bytearray(struct.pack(f"<QQ{len(raws)}Q", stream.tell(), len(raws), *(raw.nbytes for raw in raws)))
    out += stream.getbuffer()
    for raw in raws:
        out += bytes(_aligned(len(out)) - len(out))
        out += raw
    return out


def loads(data):
    """A value from :func:`dumps`'s bytes; its tensors are views of ``data`` where it is
    writable (a private memory map, as the prefix cache reads), else of a copy."""
    view = memoryview(data)
    if view.readonly:
        view = memoryview(bytearray(view))
    pickled_length, count = struct.unpack_from("<QQ", view)
    lengths = struct.unpack_from(f"<{count}Q", view, 16)
    position = 16 + 8 * count
    pickled = view[position:position + pickled_length]
    position += pickled_length
    buffers = []
    for length in lengths:
        position = _aligned(position)
        buffers.append(view[position:position + length])
        position += length
    _Loading.mode = None
    try:
        return pickle.loads(pickled, buffers=buffers)
    finally:
        _Loading.mode = None
