"""A device's cost table: predicted GPU time (ms per inference) of an ET-VK layout assignment.

A table prices a *query* (:mod:`costmodel.queries`): a node reading its primary input in one
representation and writing its output in another, or a layout transition (the pass's clone).
Two sources, in this order:

- *measured*: the node itself, measured on this device in that pair, by (graph, node, input,
  output), ``graph`` being the digest of its partition as the layout pass receives it, so a
  node is the same in every program of one model;
- *fitted*: its model (a :class:`costmodel.model.CostModel`) of the node's operator,
  representations and shapes, with the relative error per operator it is expected to make on
  a model it never saw (from leaving calibration models out).

A table's file is read (:func:`load`, :func:`parse`) and written (:func:`save`) here. No
table is held here: a sweep reads ``--costs`` once and carries it to its workers, and the
harness hands it to each pass that prices with it (:mod:`strategies.priced_layout`).
"""

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from costmodel.device_limits import DeviceLimits
from costmodel.intervals import Intervals
from costmodel.model import CostModel
from costmodel.per_operator import PerOperatorModel
from costmodel.queries import Price, Query
from costmodel.support import Support
from layoutkit.errors import UsageError
from layoutkit.files import write_whole

COSTS_ENV = "LAYOUTBENCH_COSTS"  # the command line's default for --costs, read there once
# 3: fits price a node by its graph's weights too; 4: int8 nodes only; 5: its load, a spread; 6: a node's kernel
# family in its fit's categories, a support and intervals
FORMAT = "layoutbench-costs-6"
NO_TABLE = (f"no GPU cost table: pass --costs FILE (or set {COSTS_ENV}) to a table written by "
            "`layoutbench calibrate` (docs/cost-table/h100.json is an H100's)")
# Where the table has no error of its own for an operator (one it never measured): a guess
# far from any measured operator's, so that nothing rides on it.
UNSEEN_OPERATOR_ERROR = 1.0


def model_kinds() -> dict:
    """Each kind of model a table may hold, by the name its file gives it."""
    # numpy, pandas and LightGBM's models, read lazily: the command line reads tables without them
    from costmodel.gradient_boosted import GradientBoostedModel
    from costmodel.transferred import TransferredModel

    return {model.kind: model for model in (PerOperatorModel, GradientBoostedModel, TransferredModel)}


@dataclass
class CostTable:
    device: str
    model: CostModel = field(default_factory=lambda: PerOperatorModel({}))
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
    support: Support | None = None  # kernel families and sizes its corpus measured (a fit's table)
    intervals: Intervals | None = None  # its predictions' error bars, from models its fit left out

    def price(self, queries: list[Query]) -> list[Price]:
        """Each query's price: measured where the table has the node in that pair, else fitted."""
        prices = []
        for query, estimate in zip(queries, self.model.predict(queries)):
            measured = self.nodes.get((query.graph, query.node, query.input, query.output)) if query.node else None
            prices.append(Price(measured, True, 0.0) if measured is not None
                          else Price(float(estimate), False, self.errors.get(query.operator, UNSEEN_OPERATOR_ERROR)))
        return prices

    def ready(self) -> None:
        """Build what pricing needs now: whoever times a strategy calls it first."""
        self.model.ready()

    def to_json(self) -> dict:
        return {
            "format": FORMAT, "device": self.device,
            # only with limits: a table without them keeps the bytes, so the digest, it had
            **({"limits": self.limits.to_json()} if self.limits is not None else {}),
            "corpus": self.corpus,
            "errors": dict(sorted(self.errors.items())),
            "spread": self.spread,
            "probes": dict(sorted(self.probes.items())),
            **({"support": self.support.to_json()} if self.support else {}),
            **({"intervals": self.intervals.to_json()} if self.intervals else {}),
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
            model=kinds[model["kind"]].from_json(model, cls.from_json),
            nodes={(e["graph"], e["node"], e["input"], e["output"]): float(e["ms"]) for e in data["nodes"]},
            errors={op: float(error) for op, error in data.get("errors", {}).items()},
            corpus=data.get("corpus", {}),
            probes=data.get("probes", {}),
            spread=float(data.get("spread", 0.0)),
            digest=digest,
            limits=DeviceLimits.from_json(data["limits"]) if "limits" in data else None,
            support=Support.from_json(data["support"]) if "support" in data else None,
            intervals=Intervals.from_json(data["intervals"]) if "intervals" in data else None,
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


def save(table: CostTable, path) -> None:
    """Write ``table`` to ``path`` whole or not at all: a run starting meanwhile reads the old file or the new."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_whole(path, table.to_bytes())
