"""The cost model's adapter to torch.fx: a node's signature (:mod:`costmodel.signatures`) and
a partition's graph digest, read off the graph the layout pass receives. The one module of
the cost model that imports torch (an import contract holds it), so that a table is read,
fitted and priced without it."""

import hashlib

import torch

from costmodel.signatures import ACTIVATION, CONSTANT, op_name


def dtype_name(dtype: torch.dtype) -> str:
    """A dtype as records and signatures name it: ``float32`` for ``torch.float32``."""
    return str(dtype).removeprefix("torch.")


def node_values(node: torch.fx.Node) -> list:
    """The fake tensors a node produces: one, or one per output of a multi-output op."""
    val = node.meta["val"]
    return list(val) if isinstance(val, (list, tuple)) else [val]


def _argument(value):
    if isinstance(value, torch.fx.Node):
        values = node_values(value)
        tensor = values[0] if values and isinstance(values[0], torch.Tensor) else None
        if tensor is None:
            return None
        # The layout pass's own notion of a constant: a tensor ET-VK serializes as a TensorRef.
        return {CONSTANT if value.meta.get("etvk_tensorref", False) else ACTIVATION: list(tensor.shape)}
    if isinstance(value, (list, tuple)):
        return [_argument(item) for item in value]
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    return str(value)  # dtypes, memory formats, devices


def signature(node: torch.fx.Node) -> dict:
    outputs = [v for v in node_values(node) if isinstance(v, torch.Tensor)]
    return {
        "operator": op_name(node.target),
        "args": [_argument(arg) for arg in node.args],
        "kwargs": {name: _argument(value) for name, value in sorted(node.kwargs.items())},
        "outputs": [list(v.shape) for v in outputs],
        "dtype": dtype_name(outputs[0].dtype) if outputs else None,
    }


def graph_digest(graph_module: torch.fx.GraphModule, inserted: frozenset = frozenset()) -> str:
    """A partition's graph as the layout pass receives it: its nodes' names, operators and
    shapes (``inserted``: clones a pass added, left out). Nodes of two programs with this
    digest are the same nodes."""
    digest = hashlib.sha256()
    for node in graph_module.graph.nodes:
        if node.name in inserted:
            continue
        value = node.meta.get("val")
        shape = tuple(value.shape) if isinstance(value, torch.Tensor) else None
        digest.update(f"{node.op}|{node.name}|{op_name(node.target)}|{shape}\n".encode())
    return digest.hexdigest()[:16]
