"""The kernel family ET-VK launches for a node: what its runtime picks from the node's
arguments and representations, named so that nodes run by the same shaders share a family.

Read from ET-VK's op implementations (``backends/vulkan/runtime/graph/ops/impl/`` of the
ExecuTorch the runtime is built from; each rule below names its file), first match wins; every
other operator is its own family, named by its operator. :data:`FAMILY_SHADERS` says which
shaders (an ETDump's ``kernel_name`` less its storage and dtype suffixes) each family may
dispatch, so the rule can be checked against what a device ran.
"""

import math
import re

WIDTH, HEIGHT, CHANNELS = 0, 1, 2  # WHCN dims
# The packed dim of each layout, as a WHCN index (int8 layouts: their first packed dim).
PACKED_DIMS = {"WIDTH_PACKED": WIDTH, "HEIGHT_PACKED": HEIGHT, "CHANNELS_PACKED": CHANNELS, "PACKED_INT8_4W": WIDTH,
           "PACKED_INT8_4W4C": CHANNELS, "PACKED_INT8_4H4W": WIDTH, "PACKED_INT8_4C1W": CHANNELS,
           "PACKED_INT8_CONV2D": CHANNELS}
CONVOLUTIONS = ("aten.convolution.default", "et_vk.conv_with_clamp.default")
_PRODUCTS = ("aten.linear.default", "aten.mm.default", "aten.bmm.default", "aten.addmm.default")
_REDUCTIONS = ("sum", "mean", "amax", "amin")
_MIN_OCCUPANCY_THREADS, _IM2COL_MIN_OUT_CHANNELS = 4096, 128


def _with_clamp(*names: str) -> tuple:
    return tuple(name + suffix for name in names for suffix in ("", "_clamp"))


def _products() -> dict:
    shaders = {}
    for kind in ("linear", "matmul"):
        for variant, base in (("", f"{kind}_vec"), (":scalar", kind)):
            for rows, tile in ((4, ""), (2, "_tile_row_2"), (1, "_tile_row_1")):
                shaders[f"{kind}{variant}:rows_{rows}"] = (base + tile, f"{base}_bias{tile}")
    return shaders


def _reductions() -> dict:
    shaders = {}
    for name in _REDUCTIONS:
        shaders |= {f"{name}:2d": (f"{name}2d",), f"{name}:per_row": (f"{name}_per_row",),
                    f"{name}:packed_dim": (name,), f"{name}:other_dim": (name,)}
    for name in ("softmax", "log_softmax", "native_layer_norm"):
        shaders |= {f"{name}:packed_dim": (name,), f"{name}:other_dim": (name,)}
    return shaders


# Per family, the shaders it may dispatch: a name, or a regular expression for numbered variants.
FAMILY_SHADERS = {
    "conv2d:transposed": _with_clamp("conv_transpose2d"),
    "conv2d:depthwise_3x3": _with_clamp("conv2d_dw_output_tile_3x3"),
    "conv2d:depthwise_5x5": _with_clamp("conv2d_dw_output_tile_5x5"),
    "conv2d:depthwise_sned_3x3": _with_clamp("conv2d_dw_sned_output_tile_3x3"),
    "conv2d:depthwise_sned_5x5": _with_clamp("conv2d_dw_sned_output_tile_5x5"),
    "conv2d:depthwise": _with_clamp("conv2d_dw"),
    "conv2d:depthwise_sned": _with_clamp("conv2d_dw_sned"),  # no shader of that name: the program fails to load
    "conv2d:pointwise": ("conv2d_pw_tiled",),
    "conv2d:im2col_gemm": ("conv2d_im2col", "conv2d_gemm"),
    "conv2d:grouped": _with_clamp("conv2d"),
    "conv2d:direct": _with_clamp("conv2d"),
    "conv1d": _with_clamp("conv1d"),
    "conv1d:pointwise": ("conv1d_pw", "conv1d_pw_bias"),
    "conv1d:depthwise": ("conv1d_dw", "conv1d_dw_bias"),
    **_products(),
    **_reductions(),
    "clone:int8": ("q8ta_clone",),
    "clone:texture": ("clone",),
    "clone:texture_relayout": ("view_texture",),
    "clone:image_to_buffer": ("clone_image_to_buffer",),
    "clone:buffer_to_image": ("clone_buffer_to_image",),
    "clone:buffer": ("view_buffer",),
    "q8ta_conv2d:im2col": ("q8ta_im2col", "q8ta_conv2d_pw"),
    "q8ta_conv2d:general": ("q8ta_conv2d",),
    "q8ta_linear": ("q8ta_linear", "q8ta_linear_fallback"),
    "q8ta_linear_gemv": ("q8ta_linear_gemv", "q8ta_linear_gemv_fallback"),
    "q8ta_conv2d_transposed": ("q8ta_conv2d_transposed", "q8ta_conv2d_transposed_fallback"),
}
# Operators named for their family whose shaders are not named for them.
_RESHAPES = ("clone", "permute", "view_texture", "view_buffer")
_OPERATOR_SHADERS = {
    **{name: (f"binary_{name}",) for name in ("add", "sub", "mul", "div", "minimum", "maximum", "eq", "lt", "le",
                                                "gt", "ge")},
    "pow": ("binary_pow", "pow_scalar"),  # a tensor's power, or a scalar's (Tensor_Scalar)
    "_native_batch_norm_legit_no_training": ("batchnorm",),
    "index": ("index_tensor",),
    "unfold_copy": ("unfold_copy",),
    **dict.fromkeys(("relu", "hardtanh", "clamp"), ("clamp",)),
    **dict.fromkeys(("view_copy", "squeeze_copy", "unsqueeze_copy"), _RESHAPES),
    "cat": (r"concat_\d+", "set_zero", r"update_concat_offset_\d+"),
    "constant_pad_nd": ("pad",),
    "max_pool2d_with_indices": ("max_pool2d",),
    "split_with_sizes_copy": ("split",),
    "_to_dim_order_copy": ("view_convert",),
    "native_group_norm": ("group_norm_reduce_texture", "group_norm_texture"),
    "quantize_per_tensor": ("q8ta_quantize",),
    "dequantize_per_tensor": ("q8ta_dequantize",),
}
# What ET-VK appends to a shader's name per variant: storages of its tensors, then dtypes.
_VARIANT = r"(?:_(?:texture3d|texture2d|buffer|float|half|int32|int8|uint8))*"


def operator_short_name(operator: str) -> str:
    """``aten.add.Tensor`` -> ``add``."""
    parts = operator.split(".")
    return parts[1] if len(parts) > 1 else operator


def is_int8(signature: dict) -> bool:
    return signature.get("dtype") in ("int8", "uint8")


def _packed_dim(representation: str | None) -> int | None:
    return PACKED_DIMS.get(representation.partition("/")[2]) if representation else None


def _storage(representation: str | None) -> str | None:
    return representation.partition("/")[0] if representation else None


def _pair(value) -> list:
    """A convolution's stride or dilation as two numbers (a single one applies to both)."""
    values = value if isinstance(value, list) else [value]
    return (values * 2)[:2]


def _tensor(argument) -> list | None:
    return next(iter(argument.values())) if isinstance(argument, dict) else None


def _convolution(args: list, input_repr: str | None) -> str:
    """``Convolution.cpp`` (``get_conv2d_method``, ``should_use_conv2d_im2col``), ``Conv2dDW.cpp``
    (``pick_conv2d_dw_shader``; "sned": stride != dilation). The direct shader runs grouped
    convolutions (C_in / groups multiply-adds per output: their own family here) as well as
    dilated and small dense ones. A 3-D input runs height-packed pointwise or depthwise conv1d
    shaders, else the channels-packed one."""
    input_shape, weight = _tensor(args[0]) or [], _tensor(args[1]) or []
    out_channels, in_per_group, *kernel = weight + [1] * (4 - len(weight))
    stride, dilation, transposed, groups = _pair(args[3]), _pair(args[5]), bool(args[6]), args[8]
    if len(input_shape) != 4:
        if _packed_dim(input_repr) != HEIGHT:
            return "conv1d"
        return "conv1d:pointwise" if weight[-1] == 1 else "conv1d:depthwise"
    if not transposed and out_channels == groups and in_per_group == 1:
        sned = [] if stride == dilation else ["sned"]
        tile = [f"{kernel[0]}x{kernel[1]}"] if kernel in ([3, 3], [5, 5]) else []
        return "_".join(["conv2d:depthwise", *sned, *tile])
    if transposed:
        return "conv2d:transposed"
    if kernel == [1, 1]:
        return "conv2d:pointwise"
    if groups == 1 and dilation == [1, 1] and out_channels >= _IM2COL_MIN_OUT_CHANNELS:
        return "conv2d:im2col_gemm"
    return "conv2d:grouped" if groups > 1 else "conv2d:direct"


def _product(operator: str, args: list, outputs: list, output_repr: str | None) -> str:
    """``Linear.cpp``, ``Matmul.cpp`` (``pick_matmul_tile_m``): rows per thread 4, 2 or 1, the
    largest giving enough threads; the scalar shader on buffers whose widths are not multiples of 4."""
    first, second = (args[1], args[2]) if operator == "aten.addmm.default" else (args[0], args[1])
    kind = "linear" if isinstance(second, dict) and "w" in second else "matmul"
    batch, rows, columns = ([1, 1] + (outputs[0] if outputs else [1]))[-3:]
    contracted = (_tensor(first) or [0])[-1]
    scalar = _storage(output_repr) == "BUFFER" and (contracted % 4 or columns % 4)
    tile = next((t for t in (4, 2) if -(-columns // 4) * -(-rows // t) * batch >= _MIN_OCCUPANCY_THREADS), 1)
    return f"{kind}{':scalar' if scalar else ''}:rows_{tile}"


def reduced_dims(operator: str, args: list, ndim: int) -> list[int]:
    """The WHCN dims a reduction, softmax or normalization works along."""
    name = operator_short_name(operator)
    if name in ("_softmax", "_log_softmax", "softmax", "log_softmax", "cumsum", "argmax", "argmin"):
        dims = [args[1]] if len(args) > 1 and isinstance(args[1], int) else []
    elif name in ("mean", "sum", "amax", "amin", "var", "var_mean", "std", "max", "min") and len(args) > 1:
        dims = args[1] if isinstance(args[1], list) else [args[1]] if isinstance(args[1], int) else []
    elif name == "native_layer_norm" and len(args) > 1 and isinstance(args[1], list):
        dims = list(range(-len(args[1]), 0))
    elif name == "native_group_norm":
        dims = [-3, -2, -1]
    else:
        return []
    return sorted({ndim - 1 - (d % ndim) for d in dims if isinstance(d, int)}) if ndim else []


def _along(name: str, args: list, input_repr: str | None) -> str:
    """``Reduce.cpp``, ``Softmax.cpp``, ``NativeLayerNorm.cpp``."""
    input_shape = _tensor(args[0]) or []
    dims = reduced_dims(name, args, len(input_shape))
    if name in _REDUCTIONS:
        if len(dims) == 2:
            return f"{name}:2d"
        if dims == [WIDTH] and _storage(input_repr) == "BUFFER":
            return f"{name}:per_row"
    return f"{name}:{'packed_dim' if _packed_dim(input_repr) in dims else 'other_dim'}"


def _clone(signature: dict, input_repr: str | None, output_repr: str | None) -> str:
    """``Clone.cpp``."""
    if is_int8(signature):
        return "clone:int8"
    source, target = _storage(input_repr), _storage(output_repr)
    if source == target == "TEXTURE_3D":
        return "clone:texture" if input_repr == output_repr else "clone:texture_relayout"
    if source != target:
        return "clone:image_to_buffer" if source == "TEXTURE_3D" else "clone:buffer_to_image"
    return "clone:buffer"


def _int8_convolution(args: list, outputs: list) -> str:
    """``Q8taConv2d.cpp``: im2col + the pointwise shader, else the general one."""
    input_shape, groups = _tensor(args[0]) or [0, 0, 0], args[13]
    in_per_group = input_shape[-3] // groups
    pixels = math.prod(outputs[0][-2:]) if outputs else 0
    im2col = in_per_group % 4 == 0 and groups == 1 and (in_per_group >= 32 or pixels <= _MIN_OCCUPANCY_THREADS)
    return f"q8ta_conv2d:{'im2col' if im2col else 'general'}"


def kernel_family(signature: dict, input_repr: str | None, output_repr: str | None) -> str:
    """The family of kernels ET-VK launches for a node of ``signature`` (:mod:`costmodel.signatures`)
    reading its primary input in ``input_repr`` and writing ``output_repr`` (``TEXTURE_3D/CHANNELS_PACKED``)."""
    operator, args, outputs = signature["operator"], signature["args"], signature["outputs"]
    name = operator_short_name(operator)
    if operator in CONVOLUTIONS and len(args) > 8:  # a signature that names fewer is its operator's alone
        return _convolution(args, input_repr)
    if operator in _PRODUCTS and len(args) > (2 if operator == "aten.addmm.default" else 1):
        return _product(operator, args, outputs, output_repr)
    if name in (*_REDUCTIONS, "_softmax", "_log_softmax", "native_layer_norm") and len(args) > 1:
        return _along(name.lstrip("_"), args, input_repr)
    if operator == "aten.clone.default":
        return _clone(signature, input_repr, output_repr)
    if operator == "et_vk.q8ta_conv2d.default" and len(args) > 13:
        return _int8_convolution(args, outputs)
    return name


def family_shaders(family: str) -> tuple:
    """The shaders a family may dispatch (names less their variant suffixes)."""
    return FAMILY_SHADERS.get(family) or _OPERATOR_SHADERS.get(family) or (family.removesuffix("_copy"),)


def dispatches_agree(family: str, kernel_names) -> bool:
    """Whether every one of a node's dispatches (``kernel_name`` of its ETDump events) is a
    shader of its family."""
    pattern = re.compile(rf"(?:{'|'.join(family_shaders(family))}){_VARIANT}")
    return all(pattern.fullmatch(kernel) for kernel in kernel_names)
