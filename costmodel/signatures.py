"""What a node is, as a cost model sees it: its operator, the shapes of the tensors it reads
and writes, and its other arguments (a convolution's stride and groups, a reduction's dims).

A *signature* is plain JSON, the same wherever it is made: in the node map written beside a
program (what a measured dispatch ran for) and in the layout problem an optimiser prices (what
a candidate assignment would run), so a cost model fitted on one is evaluated on the other.
Made from a torch.fx node by :mod:`costmodel.fx`; read here, without torch.
"""

ACTIVATION, CONSTANT = "t", "w"  # a tensor argument: read from another node, or a weight the operator prepacks


def op_name(target) -> str:
    """An operator's name, e.g. ``aten.linear.default`` (``str`` of an edge op is its schema)."""
    return getattr(target, "__name__", str(target))


def activation_shapes(node_signature: dict) -> list[list[int]]:
    """The shapes of the activations a node reads, in argument order (lists flattened)."""
    return list(_activations(node_signature["args"]))


def _activations(argument):
    if isinstance(argument, dict) and ACTIVATION in argument:
        yield argument[ACTIVATION]
    elif isinstance(argument, list):
        for item in argument:
            yield from _activations(item)


def constant_shapes(node_signature: dict) -> list[list[int]]:
    """The shapes of the weights a node reads, in argument order."""
    return [a[CONSTANT] for a in node_signature["args"] if isinstance(a, dict) and CONSTANT in a]
