"""``bfs-downstream``: ExecuTorch 1.5.1's layout decisions, unchanged (PR #19113)."""

from executorch.backends.vulkan._passes.tag_memory_meta_pass import TagMemoryMetaPass

from strategies._registry import register_strategy


@register_strategy("bfs-downstream")
class BfsDownstream(TagMemoryMetaPass):
    """The pinned pass as shipped: for each argument, a breadth-first search over the
    downstream users (one 64-node budget per search) narrows the candidates first, and the
    upstream source's representation is used only when that leaves a choice. Inherits
    every decision, so it is node for node the unmodified pass.
    """
