"""``dfs-upstream``: the layout decisions from before ExecuTorch PR #19113."""

import operator

import executorch.backends.vulkan.utils as utils
from executorch.backends.vulkan._passes.tag_memory_meta_pass import TagMemoryMetaPass

from strategies._registry import register_strategy


@register_strategy("dfs-upstream")
class DfsUpstream(TagMemoryMetaPass):
    """Upstream first, then depth-first downstream.

    An argument first takes its upstream source's representation when the operator
    accepts it; only if a choice remains does a depth-first search of the users narrow it,
    all branches of one search sharing a single budget of ``max_trace_search_depth`` (64)
    nodes. A deep branch can exhaust the budget before a constraining sibling is seen,
    and an early conv's channels-packed choice flows along residual paths: the two
    behaviours #19113 replaced.
    """

    def constrain_op_arg_repset(self, arg_i: int, op_repsets: utils.OpRepSets) -> None:
        if self.force_fp16:
            op_repsets.try_constrain_with_arg_repset(arg_i, utils.ANY_TEXTURE)

        source_repset = self.get_arg_tensor_source_repset(op_repsets.op_node, arg_i)
        op_repsets.try_constrain_with_arg_repset(arg_i, source_repset)

        arg_repset = op_repsets.get_arg_repset(arg_i)
        if arg_repset.is_constrained():
            return
        arg_node = op_repsets.op_node.args[arg_i]
        if isinstance(arg_node, list):
            arg_node = arg_node[0]
        downstream_repset = self.trace_node_users_to_constrain_repset(arg_node, arg_repset)
        op_repsets.try_constrain_with_arg_repset(arg_i, downstream_repset)

    def trace_node_users_to_constrain_repset(self, origin_node, repset, search_depth=None):
        """Depth-first: each user is followed to the end (through ``constrain_repset_with_user``,
        which recurses here) before the next user is looked at."""
        budget = search_depth if search_depth is not None else [self.max_trace_search_depth]
        budget[0] -= 1
        if budget[0] <= 0:
            return repset

        for user, arg_i in self._users_to_trace(origin_node):
            repset = self.constrain_repset_with_user(user, arg_i, repset, budget)
            if repset.is_constrained():
                break
        return repset

    def _users_to_trace(self, node):
        """(user, argument index) pairs whose requirements apply to ``node``'s output; a
        multi-output op whose outputs are not synced is followed only through its primary
        output's ``getitem``, as the pinned pass does."""
        users = list(node.users)
        sync_outs = not self.is_valid_op_node(node) or self.get_node_cached_repsets(node).sync_outs_repr
        if utils.num_tensors_in_node(node) > 1 and not sync_outs:
            users = [u for u in users if u.target == operator.getitem and u.args[1] == 1]
        for user in users:
            arg_i = next((i for i, arg in enumerate(user.args) if arg is node), None)
            if arg_i is not None:
                yield user, arg_i
