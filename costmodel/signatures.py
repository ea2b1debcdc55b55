"""What a node is, as a cost model sees it: its operator, the shapes of the tensors it reads
and writes, and its other arguments (a convolution's stride and groups, a reduction's dims).

A *signature* is plain JSON, the same wherever it is made: in the node map written beside a
program (what a measured dispatch ran for) and in the layout problem an optimiser prices (what
a candidate assignment would run), so a cost model fitted on one is evaluated on the other.
"""

import hashlib

import torch

ACTIVATION, CONSTANT = "t", "w"  # a tensor argument: read from another node, or a weight the operator prepacks


def op_name(target) -> str:
    """An operator's name, e.g. ``aten.linear.default`` (``str`` of an edge op is its schema)."""
    return getattr(target, "__name__", str(target))


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
    """``node``'s signature."""
    outputs = [v for v in node_values(node) if isinstance(v, torch.Tensor)]
    return {
        "operator": op_name(node.target),
        "args": [_argument(arg) for arg in node.args],
        "kwargs": {name: _argument(value) for name, value in sorted(node.kwargs.items())},
        "outputs": [list(v.shape) for v in outputs],
        "dtype": str(outputs[0].dtype).removeprefix("torch.") if outputs else None,
    }


def activation_shapes(node_signature: dict) -> list[list[int]]:
    """The shapes of the activations a node reads, in argument order (lists flattened)."""
    shapes = []

    def visit(argument):
        if isinstance(argument, dict) and ACTIVATION in argument:
            shapes.append(argument[ACTIVATION])
        elif isinstance(argument, list):
            for item in argument:
                visit(item)

    visit(node_signature["args"])
    return shapes


def constant_shapes(node_signature: dict) -> list[list[int]]:
    """The shapes of the weights a node reads, in argument order."""
    return [a[CONSTANT] for a in node_signature["args"] if isinstance(a, dict) and CONSTANT in a]


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
