"""The ET-VK representation vocabulary, in one place for strategies, metrics and tools.

A representation is a (storage type, memory layout) pair; ExecuTorch 1.5.1 calls two
representations "synced" when they share packed-dim info (packed dim and block size).
Textures pack four elements along the packed dim, so a tensor's bytes depend on its
representation. Float tensors never take the ``PACKED_INT8_*`` layouts, although the
OpRepSets of layout-agnostic ops offer them to every tensor; an int8 tensor in one is padded
along its packed dims and stored four elements to an int32.
"""

import functools
import math

import executorch.backends.vulkan.utils as vk_utils
import torch
from executorch.backends.vulkan.serialization.vulkan_graph_schema import VkMemoryLayout, VkStorageType

from costmodel.queries import pair_name

Repr = tuple[VkStorageType, VkMemoryLayout]

DEFAULT_REPR: Repr = (VkStorageType.TEXTURE_3D, VkMemoryLayout.TENSOR_WIDTH_PACKED)
ELEMENTS_PER_TEXEL = 4  # an RGBA texel holds four elements along the packed dim
QUANTIZED_DTYPES = (torch.int8, torch.uint8)

# How the ET-VK runtime pads a tensor in a PACKED_INT8 layout (runtime/api/containers/
# Tensor.cpp, calculate_packed_dim_info and calculate_padded_sizes): per padded dim, its
# WHCN index and its alignment in a buffer and in a texture. PACKED_INT8_CONV2D is sized as
# 4W4C, as ExecuTorch's own required_image_extents does.
_WIDTH, _HEIGHT, _CHANNELS = 0, 1, 2
_PACKED_INT8_PADDING = {
    VkMemoryLayout.PACKED_INT8_4W: ((_WIDTH, 4, 16),),
    VkMemoryLayout.PACKED_INT8_4W4C: ((_CHANNELS, 4, 4), (_WIDTH, 4, 4)),
    VkMemoryLayout.PACKED_INT8_4H4W: ((_WIDTH, 4, 4), (_HEIGHT, 4, 4)),
    VkMemoryLayout.PACKED_INT8_4C1W: ((_CHANNELS, 4, 16),),
    VkMemoryLayout.PACKED_INT8_CONV2D: ((_CHANNELS, 4, 4), (_WIDTH, 4, 4)),
}


def _packed_int8_bytes(dims, storage: VkStorageType, layout: VkMemoryLayout) -> int:
    """One byte an element of the padded sizes: the runtime unsqueezes to a multiple of four
    dims, then aligns the packed dims."""
    ndim = max(4, -(-len(dims) // 4) * 4)
    padded = [1] * (ndim - len(dims)) + list(dims)
    for whcn_dim, buffer_align, texture_align in _PACKED_INT8_PADDING[layout]:
        align = buffer_align if storage == VkStorageType.BUFFER else texture_align
        padded[-1 - whcn_dim] = -(-padded[-1 - whcn_dim] // align) * align
    return math.prod(padded)


def element_bytes(dtype: torch.dtype, force_fp16: bool) -> int:
    """Bytes of one element of a tensor of ``dtype`` in an ET-VK program: of the dtype
    ``VkGraphBuilder`` serializes it as (``get_effective_dtype``), float32 as float16 under
    ``force_fp16`` and 64-bit types as 32-bit (``vulkan_preprocess``'s default, which the
    harness keeps). The exported program's tensors keep their own dtype: counted by theirs, an
    ``.fp16`` program's transitions would move twice the bytes its delegate does."""
    if force_fp16 and dtype == torch.float32:
        return torch.float16.itemsize
    if dtype in (torch.float64, torch.int64):
        return torch.int32.itemsize
    return dtype.itemsize


def tensor_bytes(dims, element_bytes: int, storage: VkStorageType, layout: VkMemoryLayout) -> int:
    """Bytes of a tensor in a representation; textures round the packed dim up to 4, the
    PACKED_INT8 layouts their packed dims up to their blocks."""
    if layout in _PACKED_INT8_PADDING:
        return _packed_int8_bytes(dims, storage, layout)
    if storage == VkStorageType.BUFFER:
        return math.prod(dims) * element_bytes
    return math.prod(image_extents(dims, layout)) * ELEMENTS_PER_TEXEL * element_bytes


# The PACKED_INT8 layouts ExecuTorch's required_image_extents does not size: one packed dim each.
_UNSIZED_INT8 = (VkMemoryLayout.PACKED_INT8_4W, VkMemoryLayout.PACKED_INT8_4C1W)


def image_extents(dims, layout: VkMemoryLayout) -> tuple[int, int, int]:
    """The (x, y, z) texels of a tensor of ``dims`` in a texture of ``layout``, as ET-VK sizes
    its image: width, height, channels times batch, the packed dim divided by its block
    (ExecuTorch's own ``required_image_extents``; for the two int8 layouts it does not know,
    the runtime's ``calculate_image_extents``: the packed dim by its texture block)."""
    if layout not in _UNSIZED_INT8:
        return tuple(vk_utils.required_image_extents(torch.Size(dims), layout))
    batch, channels, height, width = [*([1] * 4), *dims][-4:]
    whcn = [width, height, channels]
    ((packed_dim, _, texture_block),) = _PACKED_INT8_PADDING[layout]
    whcn[packed_dim] = -(-whcn[packed_dim] // texture_block)
    return whcn[0], whcn[1], whcn[2] * batch


def layouts_for(dtype: torch.dtype) -> set:
    """The memory layouts a tensor of ``dtype`` can be stored in."""
    if dtype in QUANTIZED_DTYPES:
        return vk_utils.universal_memory_layout_set
    return vk_utils.all_memory_layouts


def filtered(repset: vk_utils.TensorRepSet, dtype) -> vk_utils.TensorRepSet:
    """The part of a repset a tensor of ``dtype`` can take."""
    layouts = layouts_for(dtype)
    return vk_utils.TensorRepSet(repset.valid_buffer_layouts & layouts, repset.valid_texture_layouts & layouts)


def _reprs(repset: vk_utils.TensorRepSet) -> list[Repr]:
    """A repset's representations in a fixed order: buffers, then textures, each by layout."""
    return ([(VkStorageType.BUFFER, layout) for layout in sorted(repset.valid_buffer_layouts)]
            + [(VkStorageType.TEXTURE_3D, layout) for layout in sorted(repset.valid_texture_layouts)])


def reprs_of(repset: vk_utils.TensorRepSet, dtype: torch.dtype) -> list[Repr]:
    """The representations a TensorRepSet allows a tensor of ``dtype``."""
    return _reprs(filtered(repset, dtype))


@functools.cache  # a handful of representations, asked about constantly by the searches
def packed_dim_info(representation: Repr) -> vk_utils.PackedDimInfo:
    storage, layout = representation
    return vk_utils.PackedDimInfo.from_repr(layout, storage)


def as_pair(representation: vk_utils.TensorRepr) -> Repr:
    return (representation.storage_type, representation.memory_layout)


def repset_packed_dim_infos(repset: vk_utils.TensorRepSet) -> set:
    """The packed-dim infos a repset's representations have."""
    return {packed_dim_info(r) for r in _reprs(repset)}


def repr_name(representation: vk_utils.TensorRepr) -> str:
    """E.g. ``TEXTURE_3D/CHANNELS_PACKED``: the name a cost table gives its pair."""
    return pair_name(as_pair(representation))


def repset_name(repset: vk_utils.TensorRepSet) -> str:
    """E.g. ``TEXTURE_3D/{CHANNELS_PACKED} | BUFFER/{WIDTH_PACKED,CHANNELS_PACKED}``."""
    parts = []
    for storage, layouts in (("TEXTURE_3D", repset.valid_texture_layouts), ("BUFFER", repset.valid_buffer_layouts)):
        names = sorted(layout.name.removeprefix("TENSOR_") for layout in layouts)
        if names:
            parts.append(f"{storage}/{{{','.join(names)}}}")
    return " | ".join(parts) or "anything"


def node_reprs(node: torch.fx.Node) -> list:
    """A tagged node's representations: one, or one per output of a multi-output op."""
    representation = vk_utils.get_node_repr(node)
    return list(representation) if isinstance(representation, list) else [representation]


def first_repr(node: torch.fx.Node):
    """The representation of a node's first tagged output (a multi-output node keeps a list)."""
    return next((r for r in node_reprs(node) if r is not None), None)
