"""Predicted GPU time of an ET-VK layout assignment, from a cost table calibrated on one device.

A cost table (JSON, written by ``layoutbench calibrate``) prices, in milliseconds per inference:

- a *node* in a representation where that node was measured: (graph, node, input, output),
  with ``graph`` the digest of its partition's graph as the layout pass receives it, so a
  node is the same node in every program of one model;
- an *operator* elsewhere: (operator, input, output) as a fixed cost plus a cost per output
  element, fitted over every measured node of that operator in those representations;
  failing that, the operator over all representations (``pooled``). A node measured in
  some pairs but not this one is priced no lower than the slowest pair measured on it: the
  estimate ignores the node's shape (a softmax along its packed dim runs several times
  slower than one of the same size across it), and an optimiser would take the estimate's
  optimism for a saving, so unmeasured pairs are assumed no better than what was seen;
- a *transition* (the pass's clone) from one representation to another: a fixed cost plus a
  cost per byte of the tensor it copies.

A node's ``input`` is the representation its primary (first tensor) argument is read in, its
``output`` that of its first output; representations are named as ``TEXTURE_3D/WIDTH_PACKED``.
A node the table cannot price costs nothing and is counted (``unpriced``): the prediction
says how much of the program it covers.

The table in force is the file named by ``$LAYOUTBENCH_COSTS`` (the command line's
``--costs`` sets it for every worker).
"""

import functools
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from layoutkit.errors import UnavailableError, UsageError

if TYPE_CHECKING:  # the command line reads COSTS_ENV from here without importing torch
    import torch

    from strategies.representations import Repr

COSTS_ENV = "LAYOUTBENCH_COSTS"
FORMAT = "layoutbench-costs-1"
NO_TABLE = (f"no GPU cost table: pass --costs FILE (or set {COSTS_ENV}) to a table written by "
            "`layoutbench calibrate` (docs/cost-table/h100.json and lavapipe.json are two)")


def pair_name(representation: "Repr") -> str:
    """A (storage, layout) pair named as ``TEXTURE_3D/WIDTH_PACKED``."""
    storage, layout = representation
    return f"{storage.name}/{layout.name.removeprefix('TENSOR_')}"


@dataclass(frozen=True)
class LinearCost:
    """``fixed_ms`` plus ``ns_per_unit`` per unit (output element, or byte copied)."""

    fixed_ms: float
    ns_per_unit: float

    def ms(self, units: float) -> float:
        return self.fixed_ms + self.ns_per_unit * units * 1e-6


@dataclass
class CostTable:
    device: str
    nodes: dict = field(default_factory=dict)  # (graph, node, input, output) -> ms
    operators: dict = field(default_factory=dict)  # (operator, input, output) -> LinearCost
    pooled: dict = field(default_factory=dict)  # operator -> LinearCost
    transitions: dict = field(default_factory=dict)  # (from, to) -> LinearCost
    pooled_transition: LinearCost | None = None
    digest: str = ""

    def __post_init__(self):
        self._slowest: dict = {}  # (graph, node) -> its slowest measured pair
        for (graph, node, _, _), ms in self.nodes.items():
            self._slowest[(graph, node)] = max(ms, self._slowest.get((graph, node), 0.0))

    def node_ms(self, graph: str, node: str, operator: str, input_name: str, output_name: str,
                elements: int) -> float | None:
        """A node's time in those representations, or None where the table cannot price it."""
        measured = self.nodes.get((graph, node, input_name, output_name))
        if measured is not None:
            return measured
        fitted = self.operators.get((operator, input_name, output_name)) or self.pooled.get(operator)
        if fitted is None:
            return None
        return max(fitted.ms(elements), self._slowest.get((graph, node), 0.0))

    def transition_ms(self, source: str, target: str, size_bytes: int) -> float | None:
        fitted = self.transitions.get((source, target)) or self.pooled_transition
        return None if fitted is None else fitted.ms(size_bytes)

    def to_json(self) -> dict:
        def linear(cost: LinearCost) -> dict:
            return {"fixed_ms": cost.fixed_ms, "ns_per_unit": cost.ns_per_unit}

        return {
            "format": FORMAT,
            "device": self.device,
            "nodes": [{"graph": g, "node": n, "input": i, "output": o, "ms": ms}
                      for (g, n, i, o), ms in sorted(self.nodes.items())],
            "operators": [{"operator": op, "input": i, "output": o, **linear(c)}
                          for (op, i, o), c in sorted(self.operators.items())],
            "pooled": [{"operator": op, **linear(c)} for op, c in sorted(self.pooled.items())],
            "transitions": [{"from": f, "to": t, **linear(c)} for (f, t), c in sorted(self.transitions.items())],
            "pooled_transition": linear(self.pooled_transition) if self.pooled_transition else None,
        }

    @classmethod
    def from_json(cls, data: dict, digest: str = "") -> "CostTable":
        def linear(entry: dict) -> LinearCost:
            return LinearCost(float(entry["fixed_ms"]), float(entry["ns_per_unit"]))

        pooled_transition = data.get("pooled_transition")
        return cls(
            device=data["device"],
            nodes={(e["graph"], e["node"], e["input"], e["output"]): float(e["ms"]) for e in data["nodes"]},
            operators={(e["operator"], e["input"], e["output"]): linear(e) for e in data["operators"]},
            pooled={e["operator"]: linear(e) for e in data["pooled"]},
            transitions={(e["from"], e["to"]): linear(e) for e in data["transitions"]},
            pooled_transition=linear(pooled_transition) if pooled_transition else None,
            digest=digest,
        )


@functools.cache
def _load(path: str, mtime_ns: int) -> CostTable:
    body = Path(path).read_bytes()
    try:
        data = json.loads(body)
        if data.get("format") != FORMAT:
            raise ValueError(f"its format is {data.get('format')!r}, not {FORMAT!r}")
        return CostTable.from_json(data, hashlib.sha256(body).hexdigest()[:16])
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise UsageError(f"{path} is not a cost table written by `layoutbench calibrate` ({error})") from None


def load(path) -> CostTable:
    """The cost table in ``path`` (read once while the file is unchanged)."""
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"cost table {path} does not exist; write one with `layoutbench calibrate`")
    return _load(str(path.resolve()), path.stat().st_mtime_ns)


def active_table() -> CostTable | None:
    """The table ``$LAYOUTBENCH_COSTS`` names, or None."""
    path = os.environ.get(COSTS_ENV)
    return load(path) if path else None


def required_table() -> CostTable:
    """The table in force; a strategy that needs one is skipped, saying how to get one, without."""
    table = active_table()
    if table is None:
        raise UnavailableError(NO_TABLE)
    return table


def graph_digest(graph_module: "torch.fx.GraphModule", inserted: frozenset = frozenset()) -> str:
    """A partition's graph as the layout pass receives it: its nodes' names, operators and
    shapes (``inserted``: clones a pass added, left out). Nodes of two programs with this
    digest are the same nodes."""
    import torch

    from strategies.representations import op_name

    digest = hashlib.sha256()
    for node in graph_module.graph.nodes:
        if node.name in inserted:
            continue
        value = node.meta.get("val")
        shape = tuple(value.shape) if isinstance(value, torch.Tensor) else None
        digest.update(f"{node.op}|{node.name}|{op_name(node.target)}|{shape}\n".encode())
    return digest.hexdigest()[:16]
