"""``all-width-packed``: a baseline that ignores neighbours."""

import executorch.backends.vulkan.utils as utils
from executorch.backends.vulkan._passes.tag_memory_meta_pass import TagMemoryMetaPass
from executorch.backends.vulkan.serialization.vulkan_graph_schema import VkMemoryLayout

from strategies._registry import register_strategy

WIDTH_PACKED_ANY_STORAGE = utils.TensorRepSet({VkMemoryLayout.TENSOR_WIDTH_PACKED},
                                              {VkMemoryLayout.TENSOR_WIDTH_PACKED})


@register_strategy("all-width-packed")
class AllWidthPacked(TagMemoryMetaPass):
    """Every tensor width-packed where its operator allows it: a texture, or a buffer where
    no texture can hold the tensor (the pass prefers texture when both remain). Neither
    upstream sources nor downstream users are consulted, so a transition appears wherever
    an operator insists on another representation. Subclasses may set ``preferred``
    to another repset to get the same policy for another layout.
    """

    preferred: utils.TensorRepSet = WIDTH_PACKED_ANY_STORAGE

    def constrain_op_repsets(self, op_repsets: utils.OpRepSets) -> None:
        for i, arg in enumerate(op_repsets.op_node.args):
            if utils.is_tensor_arg_node(arg):
                op_repsets.try_constrain_with_arg_repset(i, self.preferred)
        op_repsets.try_constrain_with_out_repset(self.preferred)
