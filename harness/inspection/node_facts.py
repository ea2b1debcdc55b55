"""What one strategy did at each node of Model Explorer's drawing of a model, and what it
costs there: the representation it gave the node, the transitions it inserted from the
node's output, the node's predicted GPU time under a cost table, where that price came from
and the kernel families there outside the table's support, and the GPU time a vulkan-run measured.

Facts are keyed by the adapter's node id (:mod:`harness.inspection.explorer_ids`). Where
ET-VK drew several nodes of a partition as one (a linear fused from several edge nodes),
their times and transitions add up. A node's time is its own and that of the transitions
of its output, so that the nodes' times add up to the program's (``predicted_gpu_ms``; the
dispatches' GPU time less ET-VK's copies of inputs and outputs).
"""

from dataclasses import dataclass, field

import pandas as pd

from harness.errors import UsageError
from harness.inspection.explain import node_representations
from harness.inspection.explorer_ids import drawn_as
from harness.inspection.profile import kept_dispatches, recorded_runs
from harness.targets.vulkan.compile.etrecord import EdgeGraph
from harness.targets.vulkan.compile.lowering import LoweredProgram
from harness.targets.vulkan.compile.metrics import partition_transitions
from harness.targets.vulkan.local.dispatches import STAGING


@dataclass
class NodeFacts:
    """One strategy at one drawn node (times in µs per inference)."""

    representation: str | None = None
    transitions: list = field(default_factory=list)  # the representations its output is copied to
    transition_bytes: int = 0
    predicted_us: float | None = None
    predicted_fitted_us: float = 0.0  # the part of predicted_us priced by the fit, not measured here
    predicted_error: float = 0.0  # the fit's relative error expected where it priced the node
    outside_support: set = field(default_factory=set)  # kernel families of its fitted prices outside the support
    measured_us: float | None = None


def measured_dispatches(results: str, model: str, strategy: str) -> pd.DataFrame | None:
    """The dispatches of the strategy's latest ok vulkan-run of the model in ``results`` (its
    own or imported from another machine), or None where there is none with an ETDump."""
    try:
        record = recorded_runs(results, model, [strategy])[0]
    except UsageError:
        return None
    return kept_dispatches(results, model, strategy) if record["status"] == "ok" else None


def node_facts(lowered: LoweredProgram, edge: EdgeGraph, priced: pd.DataFrame | None = None,
               dispatches: pd.DataFrame | None = None) -> tuple[dict[str, NodeFacts], list[str]]:
    """Per drawn node, what the strategy did there and what it costs (``priced``: the program's
    :func:`~harness.inspection.explain.priced_nodes` under a cost table); and the partitions'
    nodes that the drawing has no place for (whose facts are left out)."""
    facts: dict[str, NodeFacts] = {}
    ids = [drawn_as(partition.program.graph, edge) for partition in lowered.partitions]
    undrawn: set[str] = set()

    def at(index: int, name: str) -> NodeFacts:
        drawn = ids[index].get(name)
        if drawn is None:
            undrawn.add(name)
            return NodeFacts()  # kept nowhere
        return facts.setdefault(drawn, NodeFacts())

    for (index, name), representation in node_representations(lowered).items():
        at(index, name).representation = representation
    for index, partition in enumerate(lowered.partitions):
        for transition in partition_transitions(index, partition):
            node = at(index, transition.source)
            node.transitions.append(transition.after)
            node.transition_bytes += transition.bytes
    for price in priced.itertuples() if priced is not None else ():
        node = at(price.partition, price.node)
        node.predicted_us = (node.predicted_us or 0.0) + 1000 * price.predicted_ms
        if not price.measured:
            node.predicted_fitted_us += 1000 * price.predicted_ms
            node.predicted_error = max(node.predicted_error, price.error)
        if pd.notna(price.outside_support):
            node.outside_support.add(price.outside_support)
    if dispatches is not None:
        ran = dispatches[dispatches["operator"] != STAGING]
        for (index, name), ms in ran.groupby(["partition", "node"])["gpu_ms"].sum().items():
            node = at(index, name)  # a transition is drawn as its source, so its time lands there
            node.measured_us = (node.measured_us or 0.0) + 1000 * ms
    return facts, sorted(undrawn)
