"""A picture of the delegated graph: tensors coloured by representation, transitions in red.

Drawn with Graphviz (the ``graphviz`` package; Debian's ``graphviz`` renders it). So that a
ViT fits on a screen, a chain of ops that each read only the previous one, which has no
other reader, and keep its representation is drawn as one box ("12 ops: view_copy ...
add"); a transition always breaks a chain.
"""

from pathlib import Path

import executorch.backends.vulkan.utils as vk_utils
import graphviz

from costmodel.signatures import op_name
from harness.targets.vulkan.compile.lowering import LoweredProgram
from harness.targets.vulkan.compile.metrics import is_transition
from strategies.representations import first_repr, repr_name

# One colour per float representation (colour-blind-safe Okabe-Ito palette).
COLOURS = {
    "TEXTURE_3D/WIDTH_PACKED": "#56B4E9",
    "TEXTURE_3D/HEIGHT_PACKED": "#009E73",
    "TEXTURE_3D/CHANNELS_PACKED": "#E69F00",
    "BUFFER/WIDTH_PACKED": "#CC79A7",
    "BUFFER/HEIGHT_PACKED": "#F0E442",
    "BUFFER/CHANNELS_PACKED": "#999999",
}
TRANSITION_COLOUR = "#D55E00"


def _representation(node) -> str | None:
    if not vk_utils.has_node_spec_attr(node, "etvk_node_repr"):
        return None
    tagged = first_repr(node)
    return repr_name(tagged) if tagged is not None else None


def _short(node) -> str:
    """``aten.view_copy.default`` -> ``view_copy``; placeholders by name."""
    if node.op != "call_function":
        return node.name
    parts = op_name(node.target).split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _chains(nodes: list, transitions: set) -> dict:
    """Map each drawn node to the first node of its chain."""
    head = {}
    for node in nodes:
        inputs = [a for a in node.all_input_nodes if a in head]
        previous = inputs[0] if len(inputs) == 1 else None
        if (
            previous is not None
            and node.name not in transitions
            and previous.name not in transitions
            and len([u for u in previous.users if u in head or u is node]) == 1
            and _representation(previous) == _representation(node)
            and node.op == previous.op == "call_function"
        ):
            head[node] = head[previous]
        else:
            head[node] = node
    return head


def render(lowered: LoweredProgram, title: str) -> graphviz.Digraph:
    graph = graphviz.Digraph(name="layout", graph_attr={"rankdir": "TB", "label": title, "labelloc": "t",
                                                         "fontname": "Helvetica"},
                             node_attr={"style": "filled", "fontname": "Helvetica", "fontsize": "10"})
    for index, partition in enumerate(lowered.partitions):
        transitions = {n.name for n in partition.program.graph.nodes if is_transition(n, partition.prefix_node_names)}
        nodes = [n for n in partition.program.graph.nodes if _representation(n) is not None]
        head = _chains(nodes, transitions)
        members: dict = {}
        for node in nodes:
            members.setdefault(head[node], []).append(node)
        with graph.subgraph(name=f"cluster_{index}") as cluster:
            cluster.attr(label=f"partition {index}", style="rounded", color="#888888")
            for first, chain in members.items():
                representation = _representation(first)
                if first.name in transitions:
                    cluster.node(f"p{index}_{first.name}", f"{representation}\\n{first.name}", shape="diamond",
                                 fillcolor=TRANSITION_COLOUR, fontcolor="white")
                    continue
                label = _short(first) if len(chain) == 1 else f"{len(chain)} ops: {_short(first)} … {_short(chain[-1])}"
                cluster.node(f"p{index}_{first.name}", label, shape="box",
                             fillcolor=COLOURS.get(representation, "#FFFFFF"), tooltip=representation)
            drawn = set()
            for node in nodes:
                for source in node.all_input_nodes:
                    edge = (head.get(source), head[node])
                    if source in head and edge[0] is not edge[1] and edge not in drawn:
                        drawn.add(edge)
                        is_clone_edge = source.name in transitions or node.name in transitions
                        cluster.edge(f"p{index}_{head[source].name}", f"p{index}_{head[node].name}",
                                     color=TRANSITION_COLOUR if is_clone_edge else "#444444",
                                     penwidth="2" if is_clone_edge else "1")
    with graph.subgraph(name="cluster_legend") as legend:
        legend.attr(label="representation", color="#BBBBBB")
        for name, colour in COLOURS.items():
            legend.node(f"legend_{name}", name, shape="box", fillcolor=colour)
        legend.node("legend_transition", "transition (clone)", shape="diamond", fillcolor=TRANSITION_COLOUR,
                    fontcolor="white")
    return graph


def write(lowered: LoweredProgram, title: str, path: Path) -> Path:
    """Render to ``path``; the format is the suffix (svg, png, pdf)."""
    path, graph = Path(path), render(lowered, title)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(graph.pipe(format=path.suffix.lstrip(".") or "svg"))
    return path
