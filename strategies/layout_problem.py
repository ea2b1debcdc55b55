"""A partition's layout assignment as a combinatorial problem, read off ExecuTorch's OpRepSets.

The pass tags *tensors* (op outputs and partition inputs) and, per operator argument, picks
the representation the operator will *use*; where a use differs from its source tensor's
representation a clone is inserted, one per (source, target representation). This module
extracts exactly that structure, with domains and sync groups taken from the same
``OpRepSets`` the pass builds, so that any solver over it (the ILP, an exhaustive search in
the tests) speaks about the same choices.
"""

import operator
from dataclasses import dataclass, field

import executorch.backends.vulkan.utils as vk_utils
import torch
from executorch.backends.vulkan._passes.tag_memory_meta_pass import set_arg_node_repr_or_transition
from executorch.backends.vulkan.serialization.vulkan_graph_schema import VkStorageType

from costmodel.features import TRANSITION, GraphLoad
from costmodel.prediction import Prediction
from costmodel.pricing import Pricing
from costmodel.queries import Price, Query, pair_name, transition_signature
from costmodel.fx import graph_digest, node_values, signature
from costmodel.signatures import op_name
from layoutkit.errors import InvalidAssignmentError
from strategies.representations import (
    DEFAULT_REPR,
    Repr,
    as_pair,
    element_bytes,
    packed_dim_info,
    reprs_of,
    tensor_bytes,
    to_tensor_repr,
)

TensorKey = tuple[str, int]  # (producing node name, output index)


@dataclass
class Tensor:
    key: TensorKey
    node: str  # the node that carries its representation (the op, or a partition input)
    domain: list[Repr]
    shape: tuple[int, ...]
    element_bytes: int
    dtype: str = "float32"


@dataclass
class Use:
    """Operator ``op`` reads argument ``arg_index`` (one tensor, or a list) in one representation."""

    op: str
    arg_index: int
    sources: list[TensorKey]
    domain: list[Repr]


@dataclass
class Operator:
    """What prices an operator node: its signature (operator, shapes, arguments) and the use
    of its primary (first tensor) argument, if it reads one."""

    operator: str
    signature: dict
    primary_use: int | None


@dataclass
class SyncGroup:
    """Members (``("tensor", key)`` or ``("use", index)``) that must share packed-dim info."""

    op: str
    members: list[tuple[str, object]]


def _table_key(table: Pricing) -> tuple:
    """What a problem's prices are kept under: the table object, and its contents."""
    return id(table), table.digest


@dataclass
class LayoutProblem:
    """Plain data (node names, no graph objects), so it can be pickled and solved anywhere."""

    tensors: dict[TensorKey, Tensor] = field(default_factory=dict)
    uses: list[Use] = field(default_factory=list)
    sync_groups: list[SyncGroup] = field(default_factory=list)
    op_outputs: dict[str, list[TensorKey]] = field(default_factory=dict)
    operators: dict[str, Operator] = field(default_factory=dict)
    graph: str = ""  # the digest cost tables know the partition's nodes by
    _prices: dict = field(default_factory=dict, repr=False, compare=False)  # per table: see prices()

    def transition_cost(self, source: TensorKey, target: Repr, objective: str) -> float:
        if objective == "count":
            return 1.0
        tensor = self.tensors[source]
        return float(tensor_bytes(list(tensor.shape), tensor.element_bytes, *target))

    def prices(self, table: Pricing) -> tuple[dict, dict]:
        """Every price an assignment can need, asked of ``table`` at once: per operator node and
        (primary input, output) representation pair its domains allow, and per source tensor,
        representation it can have and representation a use can read it in. Kept per table."""
        key = _table_key(table)
        if key not in self._prices:
            node_keys = [(op, a, b) for op, info in self.operators.items()
                         for a in (self.uses[info.primary_use].domain if info.primary_use is not None else [None])
                         for b in self.tensors[self.op_outputs[op][0]].domain]
            targets: dict = {}
            for use in self.uses:
                for source in use.sources:
                    targets.setdefault(source, set()).update(use.domain)
            transition_keys = [(source, f, r) for source, reads in targets.items()
                               for f in self.tensors[source].domain for r in sorted(reads - {f})]
            self._prices[key] = self._price(table, node_keys, transition_keys)
        return self._prices[key]

    def _price(self, table: Pricing, node_keys: list, transition_keys: list) -> tuple[dict, dict]:
        """``table``'s prices of (op, input, output) nodes and (source, from, to) transitions."""
        load = GraphLoad.of(operator.signature for operator in self.operators.values())
        queries = [Query(self.operators[op].signature, pair_name(a) if a else "", pair_name(b), False, self.graph, op,
                         load) for op, a, b in node_keys]
        moved: dict = {}  # per source, the signature of its clone
        for source, f, r in transition_keys:
            if source not in moved:
                moved[source] = transition_signature(self.tensors[source].shape, self.tensors[source].dtype)
            queries.append(Query(moved[source], pair_name(f), pair_name(r), True, load=load))
        priced = table.price(queries)
        return dict(zip(node_keys, priced)), dict(zip(transition_keys, priced[len(node_keys):]))

    def node_price(self, table: Pricing, op: str, input_repr: Repr | None, output_repr: Repr) -> Price:
        """An operator node's price when it reads its primary argument as ``input_repr`` and
        writes ``output_repr``."""
        return self.prices(table)[0][(op, input_repr, output_repr)]

    def transition_price(self, table: Pricing, source: TensorKey, source_repr: Repr, target: Repr) -> Price:
        return self.prices(table)[1][(source, source_repr, target)]

    def node_ms(self, table: Pricing, op: str, input_repr: Repr | None, output_repr: Repr) -> float:
        return self.node_price(table, op, input_repr, output_repr).ms

    def transition_ms(self, table: Pricing, source: TensorKey, source_repr: Repr, target: Repr) -> float:
        return self.transition_price(table, source, source_repr, target).ms

    def operator_reprs(self, tensor_reprs: dict, use_reprs: list):
        """Under an assignment, each operator node with the representation it reads its primary
        argument in (None where it reads no tensor) and the one it writes: what prices it."""
        for op, info in self.operators.items():
            primary = use_reprs[info.primary_use] if info.primary_use is not None else None
            yield op, primary, tensor_reprs[self.op_outputs[op][0]]

    def prediction(self, table: Pricing, tensor_reprs: dict, use_reprs: list) -> Prediction:
        """An assignment's time under ``table``: its operators' and transitions' prices (only
        those, where no strategy has asked this problem for all of them)."""
        node_keys = list(self.operator_reprs(tensor_reprs, use_reprs))
        transition_keys = [(source, tensor_reprs[source], target)
                           for source, target in needed_transitions(self, tensor_reprs, use_reprs)]
        node_prices, transition_prices = self._prices.get(_table_key(table)) or self._price(
            table, node_keys, transition_keys)
        priced = [(self.operators[op].operator, node_prices[op, a, b]) for op, a, b in node_keys]
        priced += [(TRANSITION, transition_prices[k]) for k in transition_keys]
        return Prediction.of(priced)

    def predicted_ms(self, table: Pricing, tensor_reprs: dict, use_reprs: list) -> float:
        return self.prediction(table, tensor_reprs, use_reprs).ms

    def domain_of(self, member) -> list[Repr]:
        kind, ref = member
        return self.tensors[ref].domain if kind == "tensor" else self.uses[ref].domain


def _dtype(value: torch.Tensor) -> str:
    return str(value.dtype).removeprefix("torch.")


def _tensor_key(node: torch.fx.Node) -> TensorKey:
    if node.target == operator.getitem:
        return (node.args[0].name, node.args[1])
    return (node.name, 0)


def extract(layout_pass, graph_module: torch.fx.GraphModule, inserted: frozenset = frozenset()) -> LayoutProblem:
    """The problem the pass faces on ``graph_module``; ``layout_pass`` supplies the pass's
    own notions of which nodes are operators and tensors, and its texture limits.
    ``inserted`` names clones a pass already inserted: they are seen through, so the
    problem is the one the pass started from."""
    problem = LayoutProblem(graph=graph_digest(graph_module, inserted))
    consumer_domains: dict[TensorKey, list[Repr]] = {}
    for node in graph_module.graph.nodes:
        if not layout_pass.is_valid_op_node(node) or node.target == operator.getitem or node.name in inserted:
            continue
        # The pass's own cache: a strategy that also runs the pass builds each OpRepSets once.
        repsets = layout_pass.get_node_cached_repsets(node)
        outputs = []
        for k, val in enumerate(node_values(node)):
            key = (node.name, k)
            domain = reprs_of(repsets.get_out_repset(k), val.dtype)
            if layout_pass.force_fp16:
                domain = [r for r in domain if r[0] == VkStorageType.TEXTURE_3D] or domain
            problem.tensors[key] = Tensor(key, node.name, domain, tuple(val.shape),
                                          element_bytes(val.dtype, layout_pass.force_fp16), _dtype(val))
            outputs.append(key)
        problem.op_outputs[node.name] = outputs

        use_indices = {}
        for i, arg in enumerate(node.args):
            if not layout_pass.is_non_constant_tensor_node(arg):
                continue
            members = [m.args[0] if m.name in inserted else m for m in (arg if isinstance(arg, (list, tuple)) else [arg])]
            domain = reprs_of(repsets.get_arg_repset(i), node_values(members[0])[0].dtype)
            sources = [_tensor_key(m) for m in members]
            for member, key in zip(members, sources):
                consumer_domains.setdefault(key, []).extend(domain)
                if key not in problem.tensors and member.target != operator.getitem:
                    val = node_values(member)[0]
                    problem.tensors[key] = Tensor(key, member.name, [], tuple(val.shape),
                                                  element_bytes(val.dtype, layout_pass.force_fp16), _dtype(val))
            use_indices[i] = len(problem.uses)
            problem.uses.append(Use(node.name, i, sources, domain))

        groups = []
        if repsets.sync_args_repr and len(use_indices) > 1:
            groups.append([("use", u) for u in use_indices.values()])
        if repsets.sync_outs_repr and len(outputs) > 1:
            groups.append([("tensor", key) for key in outputs])
        if repsets.sync_primary_io_repr and repsets.primary_arg_idx in use_indices:
            groups.append([("use", use_indices[repsets.primary_arg_idx]), ("tensor", outputs[0])])
        problem.sync_groups.extend(SyncGroup(node.name, members) for members in groups)
        problem.operators[node.name] = Operator(
            op_name(node.target), signature(node), min(use_indices.values()) if use_indices else None)

    # Partition inputs are free: any representation some consumer accepts.
    for key, tensor in problem.tensors.items():
        if not tensor.domain:
            tensor.domain = sorted(set(consumer_domains.get(key, [DEFAULT_REPR])))
    return problem


def needed_transitions(problem: LayoutProblem, tensor_reprs: dict, use_reprs: list) -> list:
    """The clones an assignment needs: one per (source tensor, representation read), sorted.
    Sorted, not in a set's order, which follows the hash seed: a time summed over them then
    rounds alike in every process, so records of identical inputs are identical."""
    return sorted({
        (source, r)
        for use, r in zip(problem.uses, use_reprs)
        for source in use.sources
        if tensor_reprs[source] != r
    })


def read_assignment(problem: LayoutProblem, graph_module: torch.fx.GraphModule) -> tuple[dict, list]:
    """The (tensor, use) representations a finished pass left on ``graph_module``: a use
    reads its argument node's representation, which is a clone's where one was inserted."""
    nodes = {node.name: node for node in graph_module.graph.nodes}

    def representation(node, index=0) -> Repr:
        tensor_repr = vk_utils.get_node_repr(node)
        if isinstance(tensor_repr, (list, tuple)):
            tensor_repr = tensor_repr[index]
        return as_pair(tensor_repr)

    tensor_reprs = {key: representation(nodes[t.node], key[1]) for key, t in problem.tensors.items()}
    use_reprs = []
    for use in problem.uses:
        arg = nodes[use.op].args[use.arg_index]
        use_reprs.append(representation(arg[0] if isinstance(arg, (list, tuple)) else arg))
    return tensor_reprs, use_reprs


def apply_assignment(layout_pass, graph_module, problem: LayoutProblem, tensor_reprs: dict, use_reprs: list) -> int:
    """Tag every tensor with its representation and insert the clones the uses need, with
    the pass's own machinery (``set_arg_node_repr_or_transition`` and its transition
    cache); returns the number of clones inserted, checked against what the assignment needs."""
    outputs: dict = {}
    for key, tensor in problem.tensors.items():
        outputs.setdefault(tensor.node, []).append(to_tensor_repr(tensor_reprs[key]))
    nodes = {node.name: node for node in graph_module.graph.nodes}
    for name, reprs in outputs.items():
        vk_utils.set_node_repr(nodes[name], reprs[0] if len(reprs) == 1 else vk_utils.TensorReprList(reprs))
    for node in graph_module.graph.nodes:
        if node.target == operator.getitem and layout_pass.is_valid_op_node(node):
            layout_pass.set_op_node_tensor_reprs(graph_module, node)

    transition_cache: dict = {}
    for use, representation in zip(problem.uses, use_reprs):
        set_arg_node_repr_or_transition(
            graph_module, nodes[use.op], use.arg_index, to_tensor_repr(representation), True, transition_cache
        )
    graph_module.recompile()
    needed = len(needed_transitions(problem, tensor_reprs, use_reprs))
    if len(transition_cache) != needed:
        raise InvalidAssignmentError(
            f"{type(layout_pass).__name__}: the assignment needs {needed} transitions but the pass "
            f"inserted {len(transition_cache)}"
        )
    return needed


def remove_transitions(graph_module, names: frozenset) -> None:
    """Undo a pass's clones (``names``): each reader goes back to the clone's source."""
    for node in reversed(list(graph_module.graph.nodes)):
        if node.name in names:
            node.replace_all_uses_with(node.args[0])
            graph_module.graph.erase_node(node)


def sync_components(problem: LayoutProblem) -> list[list]:
    """Members that must share packed-dim info, merged across the groups of one operator."""
    parent: dict = {}

    def root(member):
        while parent.setdefault(member, member) != member:
            member = parent[member]
        return member

    for group in problem.sync_groups:
        for member in group.members[1:]:
            parent[root(member)] = root(group.members[0])
    components: dict = {}
    for member in list(parent):
        components.setdefault(root(member), []).append(member)
    return list(components.values())


def shared_packed_dim_infos(problem: LayoutProblem, members) -> set:
    """The packed-dim infos every member's domain offers."""
    return set.intersection(*({packed_dim_info(r) for r in problem.domain_of(m)} for m in members))


def infeasible_operators(problem: LayoutProblem) -> list[str]:
    """Operators whose own constraints already admit nothing: an empty domain, or a sync
    group whose members share no packed-dim info."""
    names = set()
    for use in problem.uses:
        if not use.domain:
            names.add(use.op)
    for op_name, outputs in problem.op_outputs.items():
        if any(not problem.tensors[k].domain for k in outputs):
            names.add(op_name)
    for group in problem.sync_groups:
        if not shared_packed_dim_infos(problem, group.members):
            names.add(group.op)
    return sorted(names)
