"""Seeded random DAGs of conv / linear / elementwise / layer_norm / permute ops.

Every tensor has the cubic shape (1, W, W, W), so a permute never changes the shape and
any two tensors can meet in a residual add or mul: the generator is free to draw
arbitrary branch-and-merge structure. Sinks are returned as outputs, so no op is dead.
Named ``synthetic:<ops>`` or ``synthetic:<ops>:<seed>``.
"""

import operator
import random

import torch
from torch import nn

from layoutkit.errors import UnknownNameError, UsageError
from models._registry import ModelSpec, register_family, register_model

WIDTH = 8
MIN_OPS, MAX_OPS = 5, 10_000
UNARY_KINDS = ("conv", "linear", "layer_norm", "permute", "relu")
BINARY_OPS = {"add": operator.add, "mul": operator.mul}
PERMUTATIONS = ((0, 2, 3, 1), (0, 3, 1, 2), (0, 1, 3, 2))


class SyntheticGraph(nn.Module):
    """Runs a recipe of (kind, input indices, parameter index) steps over a value list."""

    def __init__(self, recipe: list, outputs: list[int]):
        super().__init__()
        self.recipe = recipe
        self.outputs = outputs
        self.convs = nn.ModuleList()
        self.linears = nn.ModuleList()
        self.norms = nn.ModuleList()
        for kind, _, _ in recipe:
            if kind == "conv":
                self.convs.append(nn.Conv2d(WIDTH, WIDTH, 3, padding=1))
            elif kind == "linear":
                self.linears.append(nn.Linear(WIDTH, WIDTH))
            elif kind == "layer_norm":
                self.norms.append(nn.LayerNorm(WIDTH))

    def forward(self, x: torch.Tensor):
        values = [x]
        layers = {"conv": iter(self.convs), "linear": iter(self.linears), "layer_norm": iter(self.norms)}
        for kind, inputs, param in self.recipe:
            a = values[inputs[0]]
            if kind in layers:
                values.append(next(layers[kind])(a))
            elif kind == "permute":
                values.append(a.permute(*PERMUTATIONS[param]))
            elif kind == "relu":
                values.append(torch.relu(a))
            else:
                values.append(BINARY_OPS[kind](a, values[inputs[1]]))
        return tuple(values[i] for i in self.outputs)


def make_recipe(num_ops: int, seed: int) -> tuple[list, list[int]]:
    """Draw a DAG: each op reads a recent value; binary ops also read any earlier one."""
    rng = random.Random(seed)
    recipe, used = [], set()
    for index in range(num_ops):
        produced = index + 1  # values[0] is the input
        first = max(0, produced - 1 - int(rng.expovariate(0.7)))
        if produced > 1 and rng.random() < 0.3:
            kind = rng.choice(tuple(BINARY_OPS))
            second = rng.randrange(produced)
            inputs = (first, second)
        else:
            kind = rng.choice(UNARY_KINDS)
            inputs = (first,)
        used.update(inputs)
        recipe.append((kind, inputs, rng.randrange(len(PERMUTATIONS))))
    outputs = [i for i in range(1, num_ops + 1) if i not in used]
    return recipe, outputs


def synthetic_spec(num_ops: int, seed: int = 0) -> ModelSpec:
    torch.manual_seed(seed)
    recipe, outputs = make_recipe(num_ops, seed)
    module = SyntheticGraph(recipe, outputs).eval()
    generator = torch.Generator().manual_seed(seed)
    example = torch.randn(1, WIDTH, WIDTH, WIDTH, generator=generator)
    return ModelSpec(f"synthetic:{num_ops}:{seed}", module, (example,))


def parse_name(argument: str) -> tuple[int, int]:
    """``<ops>[:<seed>]`` -> (ops, seed), checked."""
    parts = argument.split(":")
    if len(parts) > 2 or not all(p.isdigit() for p in parts):
        raise UnknownNameError("synthetic model", f"synthetic:{argument}", ["synthetic:<ops>[:<seed>]"])
    num_ops, seed = int(parts[0]), int(parts[1]) if len(parts) == 2 else 0
    if not MIN_OPS <= num_ops <= MAX_OPS:
        raise UsageError(f"a synthetic graph has {MIN_OPS} to {MAX_OPS} ops, not {num_ops}")
    return num_ops, seed


@register_family("synthetic", check=parse_name)
def any_synthetic(argument: str) -> ModelSpec:
    return synthetic_spec(*parse_name(argument))


@register_model(zoos=("quick", "full"))
def synthetic_small() -> ModelSpec:
    return synthetic_spec(40, seed=1)


@register_model(zoos=("full",))
def synthetic_large() -> ModelSpec:
    return synthetic_spec(1000, seed=1)


class PartitionedGraph(nn.Module):
    """Synthetic graphs in a row, joined by ``cumsum``, which ET-VK does not take: each graph
    is a Vulkan partition of its own, with a CPU operator between two."""

    def __init__(self, graphs: list[SyntheticGraph]):
        super().__init__()
        self.graphs = nn.ModuleList(graphs)

    def forward(self, x: torch.Tensor):
        for index, graph in enumerate(self.graphs):
            if index:
                x = torch.cumsum(x, dim=1)
            x = sum(graph(x))
        return x


@register_model(zoos=("full",))
def synthetic_partitioned() -> ModelSpec:
    """Three synthetic graphs of 12 ops as three Vulkan partitions, CPU operators between them."""
    torch.manual_seed(2)
    graphs = [SyntheticGraph(*make_recipe(12, seed)) for seed in (2, 3, 4)]
    example = torch.randn(1, WIDTH, WIDTH, WIDTH, generator=torch.Generator().manual_seed(2))
    return ModelSpec("synthetic_partitioned", PartitionedGraph(graphs).eval(), (example,))
