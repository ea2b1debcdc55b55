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

import torch
from executorch.backends.vulkan.serialization.vulkan_graph_schema import VkStorageType

from costmodel.features import GraphLoad
from costmodel.pricing import Pricing
from costmodel.fx import dtype_name, graph_digest, node_values, signature
from costmodel.queries import Query, pair_name, transition_signature
from costmodel.signatures import op_name
from strategies.representations import DEFAULT_REPR, Repr, element_bytes, packed_dim_info, reprs_of

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

    def queries(self, node_keys: list, transition_keys: list) -> list[Query]:
        """What a table prices of (op, input, output) nodes and (source, from, to) transitions, in that order."""
        load = GraphLoad.of(operator.signature for operator in self.operators.values())
        queries = [Query(self.operators[op].signature, pair_name(a) if a else "", pair_name(b), False, self.graph, op,
                         load) for op, a, b in node_keys]
        moved: dict = {}  # per source, the signature of its clone
        for source, f, r in transition_keys:
            if source not in moved:
                moved[source] = transition_signature(self.tensors[source].shape, self.tensors[source].dtype)
            queries.append(Query(moved[source], pair_name(f), pair_name(r), True, load=load))
        return queries

    def _price(self, table: Pricing, node_keys: list, transition_keys: list) -> tuple[dict, dict]:
        """``table``'s prices of (op, input, output) nodes and (source, from, to) transitions."""
        priced = table.price(self.queries(node_keys, transition_keys))
        return dict(zip(node_keys, priced)), dict(zip(transition_keys, priced[len(node_keys):]))

    def known_prices(self, table: Pricing, node_keys: list, transition_keys: list) -> tuple[dict, dict]:
        """``table``'s prices of these nodes and transitions: all of them where a strategy has asked
        for all (:meth:`prices`), else only these."""
        return self._prices.get(_table_key(table)) or self._price(table, node_keys, transition_keys)

    def domain_of(self, member) -> list[Repr]:
        kind, ref = member
        return self.tensors[ref].domain if kind == "tensor" else self.uses[ref].domain


def _tensor(key: TensorKey, node: torch.fx.Node, domain: list[Repr], value: torch.Tensor, force_fp16: bool) -> Tensor:
    return Tensor(key, node.name, domain, tuple(value.shape), element_bytes(value.dtype, force_fp16),
                  dtype_name(value.dtype))


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
            problem.tensors[key] = _tensor(key, node, domain, val, layout_pass.force_fp16)
            outputs.append(key)
        problem.op_outputs[node.name] = outputs

        use_indices = {}
        for i, arg in enumerate(node.args):
            if not layout_pass.is_non_constant_tensor_node(arg):
                continue
            listed = arg if isinstance(arg, (list, tuple)) else [arg]
            members = [m.args[0] if m.name in inserted else m for m in listed]
            domain = reprs_of(repsets.get_arg_repset(i), node_values(members[0])[0].dtype)
            sources = [_tensor_key(m) for m in members]
            for member, key in zip(members, sources):
                consumer_domains.setdefault(key, []).extend(domain)
                if key not in problem.tensors and member.target != operator.getitem:
                    problem.tensors[key] = _tensor(key, member, [], node_values(member)[0], layout_pass.force_fp16)
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


def nodes_inserted(run, graph_module: torch.fx.GraphModule) -> frozenset:
    """The names of the nodes ``run(graph_module)`` (a pass's ``call``) inserted: its clones."""
    before = {node.name for node in graph_module.graph.nodes}
    run(graph_module)
    return frozenset(node.name for node in graph_module.graph.nodes if node.name not in before)


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
    return sorted({use.op for use in problem.uses if not use.domain}
                  | {op for op, keys in problem.op_outputs.items() if not all(problem.tensors[k].domain for k in keys)}
                  | {group.op for group in problem.sync_groups if not shared_packed_dim_infos(problem, group.members)})
