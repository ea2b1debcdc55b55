"""Predicted GPU time of an ET-VK layout assignment, from a cost table of one device.

A cost table (JSON, written by ``layoutbench calibrate``) prices, in milliseconds per inference,
a *query*: a node (its signature, :mod:`strategies.node_signature`) reading its primary input
in one representation and writing its output in another, or a layout transition (the pass's
clone) of a tensor from one representation to another. Two sources, in this order:

- *measured*: the node itself, measured in that pair of representations on this device, by
  (graph, node, input, output), ``graph`` being the digest of its partition's graph as the
  layout pass receives it, so a node is the same node in every program of one model;
- *fitted*: a model of what a node costs as a function of its operator, representations and
  shapes (:mod:`strategies.cost_features`), fitted on every node the device measured, with
  the relative error it is expected to make on a model it never saw (from leaving each
  calibration model out), per operator.

A prediction says how much of it was measured and how much fitted, and how far the fitted
part can be trusted. Representations are named as ``TEXTURE_3D/WIDTH_PACKED``.

No table is held here: a sweep reads ``--costs`` once and carries the table to its
workers, and the harness hands it to each pass that prices with it when it constructs the pass
(:mod:`strategies.priced_layout`).
"""

import functools
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from layoutkit.errors import UsageError
from strategies.cost_features import GraphLoad
from strategies.device_limits import DeviceLimits

if TYPE_CHECKING:  # the command line imports this module without torch
    import torch

    from strategies.representations import Repr

COSTS_ENV = "LAYOUTBENCH_COSTS"  # the command line's default for --costs, read there once
FORMAT = "layoutbench-costs-5"  # 3: fits price a node by its graph's weights too; 4: int8 nodes only; 5: its load, a spread
NO_TABLE = (f"no GPU cost table: pass --costs FILE (or set {COSTS_ENV}) to a table written by "
            "`layoutbench calibrate` (docs/cost-table/h100.json is an H100's)")
# Where the table has no error of its own for an operator (one it never measured): a guess
# far from any measured operator's, so that nothing rides on it.
UNSEEN_OPERATOR_ERROR = 1.0
ANY = "*"  # a per-operator line for every pair of representations
MEGA_LOG2 = 20  # base lines are anchored at 2**20 units of work
ELEMENT_BYTES = {"float32": 4, "float16": 2, "int8": 1, "uint8": 1, "int32": 4, "int64": 8, "bool": 1}


def pair_name(representation: "Repr") -> str:
    """A (storage, layout) pair named as ``TEXTURE_3D/WIDTH_PACKED``."""
    storage, layout = representation
    return f"{storage.name}/{layout.name.removeprefix('TENSOR_')}"


@dataclass(frozen=True)
class Query:
    """What to price: a node's ``signature`` read as ``input`` and written as ``output``
    (a transition: its tensor's clone from ``input`` to ``output``); ``graph`` and ``node``
    name it for the measured prices (empty for a transition); ``load``: what the graph it runs
    in holds (:class:`strategies.cost_features.GraphLoad`)."""

    signature: dict = field(hash=False, compare=False)
    input: str
    output: str
    transition: bool = False
    graph: str = ""
    node: str = ""
    load: GraphLoad = GraphLoad()

    @property
    def operator(self) -> str:
        from strategies.cost_features import TRANSITION

        return TRANSITION if self.transition else self.signature["operator"]


def transition_signature(shape, dtype: str) -> dict:
    """The signature of the clone that moves a tensor of ``shape`` to another representation."""
    return {"operator": "aten.clone.default", "args": [{"t": list(shape)}], "kwargs": {}, "outputs": [list(shape)],
            "dtype": dtype}


@dataclass(frozen=True)
class Price:
    """A query's time, whether it was measured on the node itself, and the relative error
    expected of it (0 where measured)."""

    ms: float
    measured: bool
    error: float


class PerOperatorModel:
    """A fixed cost plus a cost per output element (per byte copied, for transitions) for each
    (operator, input, output), or for an operator in any representations (``*``, ``*``); queries
    it has no line for cost nothing. Tables made by hand (tests, a quick guess) use it."""

    kind = "per-operator"

    def __init__(self, lines: dict):
        self.lines = lines  # (operator, input, output) -> (fixed ms, ns per unit)

    def predict(self, queries: list[Query]):
        import math

        import numpy as np

        prices = []
        for query in queries:
            fixed, per_unit = (self.lines.get((query.operator, query.input, query.output))
                               or self.lines.get((query.operator, ANY, ANY), (0.0, 0.0)))
            shape = query.signature["outputs"][0] if query.signature["outputs"] else []
            element_bytes = ELEMENT_BYTES.get(query.signature.get("dtype"), 4) if query.transition else 1
            prices.append(fixed + per_unit * math.prod(shape) * element_bytes * 1e-6)
        return np.array(prices, dtype=float)

    def to_json(self) -> dict:
        return {"kind": self.kind, "lines": [{"operator": op, "input": i, "output": o, "fixed_ms": f, "ns_per_unit": n}
                                             for (op, i, o), (f, n) in sorted(self.lines.items())]}

    @classmethod
    def from_json(cls, data: dict) -> "PerOperatorModel":
        return cls({(e["operator"], e["input"], e["output"]): (float(e["fixed_ms"]), float(e["ns_per_unit"]))
                    for e in data["lines"]})


class GradientBoostedModel:
    """A node's time as a *base*, a power law of its work (its multiply-adds, or elements moved
    where it has none: ms = c * (work / 2**20) ** b) per (operator, input, output) measured at
    enough sizes, else per operator, else over all, times a correction: gradient-boosted trees
    (LightGBM) of log2(ms / base) over :mod:`strategies.cost_features`. The base carries the
    size dependence between the sizes measured (trees alone would price a size between two
    measured ones as one of them); the trees what depends on shapes, packing and arguments."""

    kind = "lightgbm"
    kept_prices = 500_000  # fitted prices a model keeps (about 100 MB); past that it starts over

    def __init__(self, booster_text: str, operators: list[str], base: dict):
        self.booster_text, self.operators = booster_text, operators
        # (operator, input, output) or (operator, ANY, ANY) -> (ms at 2**20 units of work, exponent,
        # log2 of the outputs computed at once, or None: see :func:`effective_log_work`)
        self.base = base

    def base_ms(self, frame) -> "np.ndarray":
        """Each row's base (rows of :func:`strategies.cost_features.node_features`)."""
        import numpy as np

        lines = [self.base.get((op, i, o)) or self.base.get((op, ANY, ANY)) or self.base[(ANY, ANY, ANY)]
                 for op, i, o in zip(frame["operator"].astype(str), frame["input_name"], frame["output_name"])]
        ms_per_mega, exponent, log_parallel = np.array(
            [(c, b, np.nan if p is None else p) for c, b, p in lines], dtype=float).reshape(-1, 3).T
        log_work = effective_log_work(frame["log_work"].to_numpy(), frame["log_serial"].to_numpy(),
                                      frame["log_output_elements"].to_numpy(), log_parallel)
        return ms_per_mega * np.exp2((log_work - MEGA_LOG2) * exponent)

    @functools.cached_property
    def booster(self):
        import lightgbm

        return lightgbm.Booster(model_str=self.booster_text)

    def frame(self, queries: list[Query]):
        """The feature table of ``queries``, the operator coded by this model's vocabulary."""
        import pandas as pd

        from strategies.cost_features import FEATURES, node_features

        rows = [node_features(q.signature, q.input, q.output, q.transition, q.load) for q in queries]
        frame = pd.DataFrame(rows, columns=list(FEATURES))
        frame["operator"] = pd.Categorical(frame["operator"], categories=self.operators)
        return frame.assign(input_name=[q.input for q in queries], output_name=[q.output for q in queries])

    def predict(self, queries: list[Query]):
        """Each query's fitted time. A node's features are those of its signature and pair, so
        a query like one priced before (a repeated block's node, the same node in another
        strategy's problem) is not priced again: the model keeps what it priced."""
        import numpy as np

        from strategies.cost_features import FEATURES

        keys = _feature_keys(queries)
        new = {key: query for key, query in zip(keys, queries) if key not in self._priced}
        if new:
            if len(self._priced) + len(new) > self.kept_prices:
                self._priced.clear()
            frame = self.frame(list(new.values()))
            correction = self.booster.predict(frame[list(FEATURES)], num_threads=1)
            self._priced.update(zip(new, (self.base_ms(frame) * np.exp2(correction)).tolist()))
        return np.array([self._priced[key] for key in keys], dtype=float)

    @functools.cached_property
    def _priced(self) -> dict:
        return {}

    def ready(self) -> None:
        """Build the booster now (importing LightGBM, parsing its trees: about two seconds once
        per process), so that no strategy's pass time pays for it."""
        _ = self.booster

    def __getstate__(self):  # a table travels to workers as text; the booster is rebuilt there
        return {"booster_text": self.booster_text, "operators": self.operators, "base": self.base}

    def __setstate__(self, state):
        self.__dict__.update(state)

    def to_json(self) -> dict:
        return {"kind": self.kind, "booster": self.booster_text, "operators": self.operators,
                "base": [{"operator": op, "input": i, "output": o, "ms_per_mega": c, "exponent": b, "log_parallel": p}
                         for (op, i, o), (c, b, p) in sorted(self.base.items())]}

    @classmethod
    def from_json(cls, data: dict) -> "GradientBoostedModel":
        base = {(e["operator"], e["input"], e["output"]): (float(e["ms_per_mega"]), float(e["exponent"]),
                                                           e["log_parallel"])
                for e in data["base"]}
        return cls(data["booster"], list(data["operators"]), base)


def _feature_keys(queries: list[Query]) -> list[tuple]:
    """What a query's fitted price depends on, hashable: its signature (serialized once per
    signature object), pair, kind and graph's load."""
    serialized: dict = {}
    keys = []
    for query in queries:
        signature = serialized.get(id(query.signature))
        if signature is None:
            signature = serialized[id(query.signature)] = json.dumps(query.signature, sort_keys=True, default=str)
        keys.append((signature, query.input, query.output, query.transition, query.load))
    return keys


def effective_log_work(log_work, log_serial, log_output_elements, log_parallel):
    """log2 of nodes' work as their dispatches see it (arrays, or a scalar ``log_parallel`` for
    all): a convolution or product computes each output from ``serial`` multiply-adds in a row
    (``log_serial``), and runs at least ``2**log_parallel`` outputs' worth of time, however few
    it has (a squeeze-excitation's 1x1 convolution of 1152 channels takes as long as its loop
    over them, not as its 55 k multiply-adds); where ``log_parallel`` is NaN or the node has no
    serial loop, its work."""
    import numpy as np

    bound = log_serial + np.maximum(log_output_elements, log_parallel)
    return np.where(np.isnan(log_parallel) | (log_serial == 0), log_work, bound)


def model_kinds() -> dict:
    """Each kind of model a table may hold, by the name its file gives it."""
    from strategies.transferred_costs import TransferredModel  # it holds a CostTable: imported once both exist

    return {model.kind: model for model in (PerOperatorModel, GradientBoostedModel, TransferredModel)}


@dataclass
class CostTable:
    device: str
    model: object = field(default_factory=lambda: PerOperatorModel({}))
    nodes: dict = field(default_factory=dict)  # (graph, node, input, output) -> measured ms
    errors: dict = field(default_factory=dict)  # operator -> relative error expected of the fit
    corpus: dict = field(default_factory=dict)  # what it was fitted on: models, programs, runs
    # Per operator, nodes of the corpus measured in several pairs: their signature and those
    # pairs, for asking the table what it prefers (``layoutbench preferences``).
    probes: dict = field(default_factory=dict)  # operator -> [{"signature", "pairs", "load"}]
    # How much runs of one program differ (relative): a saving below it is not one ilp-time takes.
    spread: float = 0.0
    digest: str = ""
    limits: DeviceLimits | None = None  # what makes a layout illegal on its device (unknown: None)

    def price(self, queries: list[Query]) -> list[Price]:
        """Each query's price: measured where the table has the node in that pair, else fitted."""
        fitted = self.model.predict(queries)
        prices = []
        for query, estimate in zip(queries, fitted):
            measured = self.nodes.get((query.graph, query.node, query.input, query.output)) if query.node else None
            if measured is not None:
                prices.append(Price(measured, True, 0.0))
            else:
                prices.append(Price(float(estimate), False, self.errors.get(query.operator, UNSEEN_OPERATOR_ERROR)))
        return prices

    def ready(self) -> None:
        """Build what pricing needs now: whoever times a strategy calls it first."""
        ready = getattr(self.model, "ready", None)  # a model with nothing to build has none
        if ready is not None:
            ready()

    def to_json(self) -> dict:
        data = {"format": FORMAT, "device": self.device}
        if self.limits is not None:  # only then: a table without limits keeps the bytes, so the digest, it had
            data["limits"] = self.limits.to_json()
        return {
            **data,
            "corpus": self.corpus,
            "errors": dict(sorted(self.errors.items())),
            "spread": self.spread,
            "probes": dict(sorted(self.probes.items())),
            "model": self.model.to_json(),
            "nodes": [{"graph": g, "node": n, "input": i, "output": o, "ms": ms}
                      for (g, n, i, o), ms in sorted(self.nodes.items())],
        }

    @classmethod
    def from_json(cls, data: dict, digest: str = "") -> "CostTable":
        model, kinds = data["model"], model_kinds()
        if model.get("kind") not in kinds:
            raise ValueError(f"its model is of kind {model.get('kind')!r}, not one of {sorted(kinds)}")
        return cls(
            device=data["device"],
            model=kinds[model["kind"]].from_json(model),
            nodes={(e["graph"], e["node"], e["input"], e["output"]): float(e["ms"]) for e in data["nodes"]},
            errors={op: float(error) for op, error in data.get("errors", {}).items()},
            corpus=data.get("corpus", {}),
            probes=data.get("probes", {}),
            spread=float(data.get("spread", 0.0)),
            digest=digest,
            limits=DeviceLimits.from_json(data["limits"]) if "limits" in data else None,
        )

    def to_bytes(self) -> bytes:
        return (json.dumps(self.to_json(), indent=1) + "\n").encode()

    def identified(self) -> "CostTable":
        """This table with the digest its file will have."""
        self.digest = body_digest(self.to_bytes())
        return self

    @property
    def name(self) -> str:
        """How records name it (their environment's ``gpu_costs``)."""
        return f"{self.device}:{self.digest}"


def body_digest(body: bytes) -> str:
    """A table's digest: of its file's bytes (:meth:`CostTable.to_bytes`), part of every record's identity."""
    return hashlib.sha256(body).hexdigest()[:16]


def parse(body: bytes, name: str = "the table") -> CostTable:
    """A table from the bytes of its file (its digest is theirs)."""
    try:
        data = json.loads(body)
        if data.get("format") != FORMAT:
            if str(data.get("format", "")).startswith("layoutbench-costs-"):
                raise UsageError(f"{name} is a cost table of format {data['format']!r}, whose fit this layoutbench "
                                 f"cannot use ({FORMAT!r}): fit it again from its measured nodes with "
                                 "`layoutbench calibrate --fit NODES --table FILE`")
            raise ValueError(f"its format is {data.get('format')!r}, not {FORMAT!r}")
        return CostTable.from_json(data, body_digest(body))
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise UsageError(f"{name} is not a cost table written by `layoutbench calibrate` ({error})") from None


def load(path) -> CostTable:
    """The cost table in ``path``, read once: a caller keeps it, rather than reading the file again."""
    path = Path(path)
    if path.is_dir():
        raise UsageError(f"cost table {path} is a directory: name the table's file in it (calibrate writes "
                         "OUT/costs.json)")
    if not path.is_file():
        raise UsageError(f"cost table {path} does not exist; write one with `layoutbench calibrate`")
    return parse(path.read_bytes(), str(path))


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
