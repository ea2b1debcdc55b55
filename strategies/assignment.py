"""A layout problem's solution: :class:`Assignment`, the representation of every tensor and of
every use, with the clones that follow from them, read off a tagged graph or applied to one."""

import operator
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType

import executorch.backends.vulkan.utils as vk_utils
import torch
from executorch.backends.vulkan._passes.tag_memory_meta_pass import set_arg_node_repr_or_transition

from costmodel.features import TRANSITION
from costmodel.prediction import Prediction
from costmodel.pricing import Pricing
from costmodel.queries import Price
from costmodel.table import CostTable
from layoutkit.errors import InvalidAssignmentError
from strategies.layout_problem import LayoutProblem, TensorKey
from strategies.representations import Repr, as_pair


@dataclass(frozen=True)
class Assignment:
    """The representation each tensor of ``problem`` is stored in and each of its uses reads
    (in the problem's order): where a use reads a tensor in another than its own, a clone.
    Two assignments are equal where they choose alike."""

    problem: LayoutProblem = field(compare=False, repr=False)
    tensors: MappingProxyType  # TensorKey -> Repr
    uses: tuple[Repr, ...]

    def __post_init__(self):
        object.__setattr__(self, "tensors", MappingProxyType(dict(self.tensors)))
        object.__setattr__(self, "uses", tuple(self.uses))

    @cached_property
    def transitions(self) -> tuple[tuple[TensorKey, Repr], ...]:
        """The clones it needs: one per (source tensor, representation read), sorted. Sorted, not
        in a set's order, which follows the hash seed: a time summed over them then rounds alike
        in every process, so records of identical inputs are identical."""
        return tuple(sorted({(source, r) for use, r in zip(self.problem.uses, self.uses)
                             for source in use.sources if self.tensors[source] != r}))

    @property
    def clones(self) -> list[tuple[TensorKey, Repr, Repr]]:
        """Its transitions as (source, the representation copied from, the one copied to)."""
        return [(source, self.tensors[source], target) for source, target in self.transitions]

    def operator_reprs(self):
        """Each operator node with the representation it reads its primary argument in (None
        where it reads no tensor) and the one it writes: what prices it."""
        for op, info in self.problem.operators.items():
            primary = self.uses[info.primary_use] if info.primary_use is not None else None
            yield op, primary, self.tensors[self.problem.op_outputs[op][0]]

    def priced(self, table: Pricing) -> list[tuple[str, str, Price]]:
        """Its operator nodes, then its clones, each as (node, operator, price under ``table``): a
        clone by its source's node and as :data:`~costmodel.features.TRANSITION`. Only these are
        asked of the table, where no strategy has asked the problem for all its prices."""
        nodes, clones = list(self.operator_reprs()), self.clones
        node_prices, clone_prices = self.problem.known_prices(table, nodes, clones)
        return ([(op, self.problem.operators[op].operator, node_prices[op, a, b]) for op, a, b in nodes]
                + [(source[0], TRANSITION, clone_prices[source, f, r]) for source, f, r in clones])

    def prediction(self, table: CostTable) -> Prediction:
        """Its time under ``table``: its operators' and transitions' prices, and which of them lie
        outside the table's support."""
        queries = self.problem.queries(list(self.operator_reprs()), self.clones)
        return Prediction.of(queries, [price for *_, price in self.priced(table)], table.support)

    @classmethod
    def read(cls, problem: LayoutProblem, graph_module: torch.fx.GraphModule) -> "Assignment":
        """The assignment a finished pass left on ``graph_module``: a use reads its argument
        node's representation, which is a clone's where one was inserted."""
        nodes = {node.name: node for node in graph_module.graph.nodes}

        def representation(node, index=0) -> Repr:
            if isinstance(node, (list, tuple)):  # a list argument: its members are read alike
                node = node[0]
            tensor_repr = vk_utils.get_node_repr(node)
            return as_pair(tensor_repr[index] if isinstance(tensor_repr, (list, tuple)) else tensor_repr)

        return cls(problem, {key: representation(nodes[t.node], key[1]) for key, t in problem.tensors.items()},
                   [representation(nodes[use.op].args[use.arg_index]) for use in problem.uses])

    def apply(self, layout_pass, graph_module: torch.fx.GraphModule) -> int:
        """Tag every tensor with its representation and insert the clones the uses need, with
        the pass's own machinery (``set_arg_node_repr_or_transition`` and its transition
        cache); returns the number of clones inserted, checked against :attr:`transitions`."""
        outputs: dict = {}
        for key, tensor in self.problem.tensors.items():
            outputs.setdefault(tensor.node, []).append(vk_utils.TensorRepr(*self.tensors[key]))
        nodes = {node.name: node for node in graph_module.graph.nodes}
        for name, reprs in outputs.items():
            vk_utils.set_node_repr(nodes[name], reprs[0] if len(reprs) == 1 else vk_utils.TensorReprList(reprs))
        for node in graph_module.graph.nodes:
            if node.target == operator.getitem and layout_pass.is_valid_op_node(node):
                layout_pass.set_op_node_tensor_reprs(graph_module, node)

        transition_cache: dict = {}
        for use, representation in zip(self.problem.uses, self.uses):
            set_arg_node_repr_or_transition(graph_module, nodes[use.op], use.arg_index,
                                            vk_utils.TensorRepr(*representation), True, transition_cache)
        graph_module.recompile()
        if len(transition_cache) != len(self.transitions):
            raise InvalidAssignmentError(f"{type(layout_pass).__name__}: the assignment needs {len(self.transitions)} "
                                         f"transitions but the pass inserted {len(transition_cache)}")
        return len(self.transitions)
