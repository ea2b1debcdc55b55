"""What a cost model knows of a node in a pair of representations: numbers read off its
signature (:mod:`costmodel.signatures`) and the representations its primary input is read in
and its output written in.

Shapes are as ET-VK sees them, along WHCN (width = the last dim, height, channels, batch), each
in log2, so that a fit compares sizes by ratio. Where the representation matters it is spelled
out: the packed dim's extent and its padding to a texel of four, texel counts, and whether a
reduction, product or permute works along the packed dim. Its *kernel*: the operator and, where
that does not say which shaders ET-VK runs, its kernel family (:mod:`costmodel.kernel_families`).
Its *work*: multiply-adds where it has them (convolutions, products), else the larger of the
elements it reads and writes. Its graph's (delegate partition's) *load*: the bytes of weights
it holds and its largest node's activations; on the H100 the same node, shapes, values and pair
ran 5-28 % slower (median 18 %) in an int8 program holding 22 MB of weights than in one holding
12 MB (docs/gpu-time.md). Operators and representations are categories; everything else is a
number (0 where it does not apply).
"""

import math
from dataclasses import dataclass

from costmodel.kernel_families import (CONVOLUTIONS, PACKED_DIMS, is_int8, kernel_family, operator_short_name,
                                       reduced_dims)
from costmodel.signatures import activation_shapes, constant_shapes

CATEGORICAL = ("operator", "input_storage", "input_packed", "output_storage", "output_packed")
NUMERIC = (
    "int8",
    "log_output_elements", "log_input_elements", "log_inputs_elements", "log_weight_elements", "log_work",
    "log_output_w", "log_output_h", "log_output_c", "log_output_n",
    "log_input_w", "log_input_h", "log_input_c", "log_input_n",
    "log_output_packed_extent", "output_padding", "log_output_texels",
    "log_input_packed_extent", "input_padding", "log_input_texels",
    "reduced_dim", "reduces_packed_dim",
    "kernel_h", "kernel_w", "stride", "log_groups", "depthwise", "log_in_channels", "log_out_channels",
    "log_contracted", "contracts_packed_dim", "permutes_packed_dim", "keeps_last_dim", "activations",
    "log_serial", "log_graph_weight_bytes", "log_graph_largest_activation",
)
FEATURES = CATEGORICAL + NUMERIC
TRANSITION = "transition"  # the operator name a layout transition (the pass's clone) is priced under

_STORAGE = {"BUFFER": 0, "TEXTURE_3D": 1}
_PRODUCTS = ("aten.linear.default", "aten.mm.default", "aten.bmm.default", "aten.addmm.default",
             "aten.matmul.default", "et_vk.q8ta_linear.default", "et_vk.q8ta_linear_gemv.default")
_INT8_CONVOLUTION = "et_vk.q8ta_conv2d"  # q8ta_conv2d, _pw and _dw: (x, ..., kernel, stride, padding, dilation, groups, ...)


def _log(value: float) -> float:
    return math.log2(value) if value > 0 else 0.0


def _whcn(shape: list[int]) -> list[int]:
    """Width, height, channels, batch (the dims before the batch folded into it)."""
    dims = [1] * max(0, 4 - len(shape)) + list(shape)
    return [dims[-1], dims[-2], dims[-3], math.prod(dims[:-3])]


def _representation(name: str | None) -> tuple[int, int]:
    """(storage, packed dim) codes; (-1, -1) where the node reads no tensor."""
    if not name:
        return -1, -1
    storage, _, layout = name.partition("/")
    return _STORAGE.get(storage, -1), PACKED_DIMS.get(layout, 3)


def _packing(shape: list[int], storage: int, packed: int) -> tuple[float, float, float]:
    """log2 of the packed dim's extent, its padding to a texel (>= 1), log2 of the texels (or
    elements of a buffer)."""
    if storage < 0 or not shape:
        return 0.0, 1.0, 0.0
    whcn = _whcn(shape)
    extent = whcn[min(packed, 3)]
    if storage == _STORAGE["BUFFER"]:
        return _log(extent), 1.0, _log(math.prod(whcn))
    padded = -(-extent // 4) * 4
    return _log(extent), padded / extent if extent else 1.0, _log(math.prod(whcn) // extent * padded / 4 if extent else 0)


def _convolution(operator: str, args: list, weights: list, primary: list, output: list) -> tuple | None:
    """(out channels, input channels per group, kernel height, kernel width, groups, stride) of a
    convolution: ATen's (its weight's shape) or ET-VK's int8 ones (kernel, stride and groups as
    arguments, the weight packed)."""
    if operator in CONVOLUTIONS and weights:
        out_channels, in_per_group, kernel_h, kernel_w = (weights[0] + [1, 1, 1, 1])[:4]
        groups = args[8] if len(args) > 8 and isinstance(args[8], int) else 1
        stride = args[3] if len(args) > 3 and isinstance(args[3], list) else [1]
        return out_channels, in_per_group, kernel_h, kernel_w, groups, stride
    if operator.startswith(_INT8_CONVOLUTION) and len(args) > 13 and len(primary) >= 3 and len(output) >= 3:
        kernel, stride, groups = args[9], args[10], args[13]
        if isinstance(kernel, list) and len(kernel) == 2 and isinstance(groups, int) and groups > 0:
            return output[-3], primary[-3] // groups, kernel[0], kernel[1], groups, stride
    return None


def weight_bytes(signature: dict) -> int:
    """Bytes of the weights a node reads: an int8 node's matrices and kernels one byte an element,
    every other weight (an int8 node's scales, sums and biases included) four."""
    int8 = is_int8(signature)
    return sum(math.prod(shape) * (1 if int8 and len(shape) > 1 else 4) for shape in constant_shapes(signature))


def activation_elements(signature: dict) -> int:
    """Elements of the activations a node reads and writes."""
    return sum(math.prod(shape) for shape in (*activation_shapes(signature), *signature["outputs"]))


@dataclass(frozen=True)
class GraphLoad:
    """What a graph holds besides a node, as far as the node's speed goes: the bytes of its
    weights and the activations of its largest node (elements read and written), the two a
    GPU's cache must hold with the node's own data."""

    weight_bytes: int = 0
    largest_activation: int = 0

    @classmethod
    def of(cls, signatures) -> "GraphLoad":
        """The load of a graph of nodes of those signatures (layout transitions left out)."""
        signatures = list(signatures)
        return cls(sum(map(weight_bytes, signatures)), max(map(activation_elements, signatures), default=0))


def node_features(signature: dict, input_name: str | None, output_name: str | None,
                  transition: bool = False, load: GraphLoad = GraphLoad()) -> dict:
    """The features of a node (or, ``transition``, of a layout transition) in those
    representations, in a graph of that ``load``.

    The graph's load is a feature of int8 nodes only: the H100 ran the same int8 node up to
    28 % slower in a graph of more weights, while float nodes shared by graphs of 47 and 87 MB
    agreed within 1 %, and letting float nodes see it priced float convolutions at the int8
    graphs' step (docs/gpu-time.md)."""
    operator = TRANSITION if transition else signature["operator"]
    args = signature["args"]
    activations = activation_shapes(signature)
    weights = constant_shapes(signature)
    output = signature["outputs"][0] if signature["outputs"] else []
    primary = activations[0] if activations else []
    input_storage, input_packed = _representation(input_name)
    output_storage, output_packed = _representation(output_name)
    output_elements, input_elements = math.prod(output), math.prod(primary) if primary else 0
    int8 = is_int8(signature)
    features = dict.fromkeys(NUMERIC, 0.0)
    features.update(
        operator=operator, input_storage=input_storage, input_packed=input_packed, output_storage=output_storage,
        output_packed=output_packed, int8=float(int8),
        log_output_elements=_log(output_elements), log_input_elements=_log(input_elements),
        log_inputs_elements=_log(sum(math.prod(s) for s in activations)),
        log_weight_elements=_log(sum(math.prod(s) for s in weights)), activations=float(len(activations)),
        log_graph_weight_bytes=_log(load.weight_bytes) if int8 else 0.0,
        log_graph_largest_activation=_log(load.largest_activation) if int8 else 0.0,
    )
    for prefix, shape, storage, packed in (("output", output, output_storage, output_packed),
                                           ("input", primary, input_storage, input_packed)):
        for dim, extent in zip("whcn", _whcn(shape) if shape else [0, 0, 0, 0]):
            features[f"log_{prefix}_{dim}"] = _log(extent)
        features.update(zip((f"log_{prefix}_packed_extent", f"{prefix}_padding", f"log_{prefix}_texels"),
                            _packing(shape, storage, packed)))

    work = max(output_elements, sum(math.prod(s) for s in activations))  # elements moved, where no multiply-adds
    reduced = reduced_dims(operator, args, len(primary))
    if reduced:
        features["reduced_dim"] = float(reduced[0])
        features["reduces_packed_dim"] = float(input_packed in reduced)
        whcn = _whcn(primary)
        groups = args[6] if operator.startswith("aten.native_group_norm") and len(args) > 6 else 1
        serial = math.prod(whcn[d] for d in reduced if d < 4) // max(groups, 1) if isinstance(groups, int) else 0
        features["log_serial"] = _log(serial)
    convolution = _convolution(operator, args, weights, primary, output)
    if convolution:
        out_channels, in_per_group, kernel_h, kernel_w, groups, stride = convolution
        depthwise = groups > 1 and in_per_group == 1
        features.update(kernel_h=float(kernel_h), kernel_w=float(kernel_w), stride=float(max(stride)),
                        log_groups=_log(groups), depthwise=float(depthwise),
                        log_in_channels=_log(in_per_group * groups), log_out_channels=_log(out_channels))
        work = output_elements * in_per_group * kernel_h * kernel_w
        features["log_serial"] = _log(in_per_group * kernel_h * kernel_w)
    elif operator in _PRODUCTS and primary:
        contracted = primary[-1]
        features.update(log_contracted=_log(contracted), contracts_packed_dim=float(input_packed == 0))
        work = output_elements * contracted
        features["log_serial"] = _log(contracted)
    elif operator.startswith("aten.permute_copy") and len(args) > 1 and isinstance(args[1], list) and primary:
        ndim = len(primary)
        source = args[1][ndim - 1 - output_packed] if 0 <= output_packed < ndim else None
        features["permutes_packed_dim"] = float(source is not None and ndim - 1 - (source % ndim) != input_packed)
    elif operator.startswith("aten.view_copy") and primary:
        features["keeps_last_dim"] = float(bool(output) and output[-1] == primary[-1])
    features["log_work"] = _log(work)
    family = kernel_family(signature, input_name, output_name)
    if family != operator_short_name(signature["operator"]):  # the kernels it runs, where its operator does not say
        features["operator"] = f"{operator}:{family}"
    return features
