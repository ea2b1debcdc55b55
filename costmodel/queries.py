"""What a cost model prices: a *query* (a node read in one representation and written in
another, or a layout transition between two), and its *price*. Representations are named as
``TEXTURE_3D/WIDTH_PACKED``."""

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from costmodel.features import TRANSITION, GraphLoad

if TYPE_CHECKING:
    from executorch.backends.vulkan.serialization.vulkan_graph_schema import VkMemoryLayout, VkStorageType

ANY = "*"  # a per-operator line for every pair of representations
ELEMENT_BYTES = {"float32": 4, "float16": 2, "int8": 1, "uint8": 1, "int32": 4, "int64": 8, "bool": 1}


def pair_name(representation: "tuple[VkStorageType, VkMemoryLayout]") -> str:
    """A (storage, layout) pair named as ``TEXTURE_3D/WIDTH_PACKED``."""
    storage, layout = representation
    return f"{storage.name}/{layout.name.removeprefix('TENSOR_')}"


@dataclass(frozen=True)
class Query:
    """What to price: a node's ``signature`` read as ``input`` and written as ``output``
    (a transition: its tensor's clone from ``input`` to ``output``); ``graph`` and ``node``
    name it for the measured prices (empty for a transition); ``load``: what the graph it runs
    in holds (:class:`costmodel.features.GraphLoad`)."""

    signature: dict = field(hash=False, compare=False)
    input: str
    output: str
    transition: bool = False
    graph: str = ""
    node: str = ""
    load: GraphLoad = GraphLoad()

    @property
    def operator(self) -> str:
        return TRANSITION if self.transition else self.signature["operator"]


def graph_loads(frame) -> dict:
    """Per graph of ``frame`` (measured nodes of whole graphs, a row each), its :class:`GraphLoad`."""
    nodes = frame[~frame["transition"]].drop_duplicates(["graph", "node"])
    return nodes.groupby("graph")["signature"].agg(GraphLoad.of).to_dict()


def node_queries(frame) -> list[Query]:
    """A query per row of ``frame`` (measured nodes: :data:`costmodel.measurements.NODE_COLUMNS`)."""
    loads = graph_loads(frame)
    return [Query(row.signature, row.input, row.output, row.transition, row.graph, row.node,
                  loads.get(row.graph, GraphLoad())) for row in frame.itertuples(index=False)]


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
