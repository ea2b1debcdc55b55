"""Model Explorer node data (its ``ModelNodeData`` JSON: graph id -> ``GraphNodeData``) of a
strategy's choices and times, and where a second strategy differs: one file per overlay,
each named in Model Explorer by a legend that gives its unit and its colours.

Per strategy, an overlay of each of its facts (:mod:`harness.inspection.node_facts`): the
representation (the colours of ``explain --graph``), the transitions (KiB moved), the
predicted time (the legend states the program's) and where that price came from, and the
measured time; between two, where the representation changed and the predicted and measured
time of the second less the first. Numbers are coloured from the smallest value to the
largest (differences: blue faster, vermillion slower, white none); nodes two strategies
treat alike are grey.
"""

from dataclasses import dataclass, field
from pathlib import Path

from harness.inspection.explorer_ids import GRAPH_ID
from harness.inspection.graph_view import COLOURS, TRANSITION_COLOUR
from harness.inspection.node_facts import NodeFacts
from layoutkit import strict_json

UNCHANGED = "#BBBBBB"  # nodes two strategies treat alike
FASTER, NEUTRAL = "#0072B2", "#FFFFFF"
MEASURED, FITTED, OUTSIDE_SUPPORT = "#009E73", "#E69F00", TRANSITION_COLOUR
PER_NODE_TIME = "µs per inference, node and its output's transitions; white least, vermillion most"


@dataclass(frozen=True)
class Overlay:
    """One node data file: its file name (``slug``), its legend and a value per node."""

    slug: str
    legend: str
    results: dict[str, dict] = field(default_factory=dict)  # adapter node id -> NodeDataResult
    gradient: tuple = ()

    def node_data(self) -> dict:
        graph = {"name": self.legend, "results": self.results}
        if self.gradient:
            graph["gradient"] = [{"stop": stop, "bgColor": colour} for stop, colour in self.gradient]
        return {GRAPH_ID: graph}


def _gradient(values) -> tuple:
    """White at the smallest value to vermillion at the largest; around zero, blue to
    vermillion, where values have both signs."""
    low, high = min(values, default=0.0), max(values, default=0.0)
    if low < 0 < high:
        return (0, FASTER), (-low / (high - low), NEUTRAL), (1, TRANSITION_COLOUR)
    if high <= 0 and low < 0:
        return (0, FASTER), (1, NEUTRAL)
    return (0, NEUTRAL), (1, TRANSITION_COLOUR)


def _numbers(slug: str, legend: str, values: dict[str, float], grey: set = frozenset()) -> Overlay:
    results = {node: {"value": round(value, 3)} for node, value in values.items()}
    for node in grey:
        results[node] = {"value": round(values.get(node, 0.0), 3), "bgColor": UNCHANGED}
    return Overlay(slug, legend, results, _gradient([r["value"] for r in results.values()]))


def _source(facts: NodeFacts) -> dict:
    if not facts.predicted_fitted_us:
        return {"value": "measured on this model", "bgColor": MEASURED}
    if facts.outside_support:
        return {"value": f"fitted outside the table's support ({'; '.join(sorted(facts.outside_support))})",
                "bgColor": OUTSIDE_SUPPORT}
    return {"value": f"fitted, ±{100 * facts.predicted_error:.0f} %", "bgColor": FITTED}


def strategy_overlays(name: str, facts: dict[str, NodeFacts], program: str | None) -> list[Overlay]:
    """A strategy's own overlays (those its facts hold); ``program``: its program's predicted
    time in words (:func:`harness.results.prediction_trust.predicted_line`), where a table priced it."""
    overlays = [
        Overlay(f"{name}-representation", f"{name}: representation (colour per storage and packed dim)",
                {node: {"value": f.representation, "bgColor": COLOURS.get(f.representation, NEUTRAL)}
                 for node, f in facts.items() if f.representation}),
        _numbers(f"{name}-transitions", f"{name}: transitions from this output (KiB moved; white few, "
                 "vermillion most)", {node: f.transition_bytes / 1024 for node, f in facts.items() if f.transitions}),
    ]
    if any(f.predicted_us is not None for f in facts.values()):
        predicted = {node: f for node, f in facts.items() if f.predicted_us is not None}
        overlays += [
            _numbers(f"{name}-predicted", f"{name}: predicted GPU time ({PER_NODE_TIME}); the program {program}",
                     {node: f.predicted_us for node, f in predicted.items()}),
            Overlay(f"{name}-predicted-source", f"{name}: where the predicted time comes from (green measured on "
                    "this model, orange fitted, ± its expected error, vermillion fitted outside the table's support, "
                    "its kernel families)",
                    {node: _source(f) for node, f in predicted.items()}),
        ]
    measured = {node: f.measured_us for node, f in facts.items() if f.measured_us is not None}
    if measured:
        overlays.append(_numbers(f"{name}-measured", f"{name}: measured GPU time, vulkan-run ({PER_NODE_TIME})",
                                 measured))
    return overlays


def _alike(first: NodeFacts | None, second: NodeFacts | None) -> bool:
    if first is None or second is None:
        return first is second
    return first.representation == second.representation and sorted(first.transitions) == sorted(second.transitions)


def difference_overlays(names: tuple[str, str], first: dict[str, NodeFacts],
                        second: dict[str, NodeFacts]) -> list[Overlay]:
    """Where the second strategy differs from the first: representation, and time (second - first)."""
    a, b = names
    nodes = sorted(set(first) | set(second))
    alike = {node for node in nodes if _alike(first.get(node), second.get(node))}
    changed = {}
    for node in nodes:
        before, after = ((facts.get(node) or NodeFacts()).representation for facts in (first, second))
        if node in alike or before is None or after is None:
            continue
        label = f"{before} -> {after}" if before != after else f"{before}, other transitions"
        changed[node] = {"value": label, "bgColor": COLOURS.get(after, TRANSITION_COLOUR)}
    overlays = [Overlay(f"{a}-vs-{b}-representation", f"representation, {a} -> {b} (colour: {b}'s; grey: alike, "
                        "same transitions)", {**{n: {"value": "alike", "bgColor": UNCHANGED} for n in alike}, **changed})]
    for kind in ("predicted", "measured"):
        def time(facts: dict[str, NodeFacts], node: str) -> float | None:
            return getattr(facts.get(node) or NodeFacts(), f"{kind}_us")

        if all(time(first, n) is None for n in nodes) or all(time(second, n) is None for n in nodes):
            continue
        values = {node: (time(second, node) or 0.0) - (time(first, node) or 0.0) for node in nodes}
        overlays.append(_numbers(f"{a}-vs-{b}-{kind}", f"{kind} GPU time, {b} - {a} (µs per inference; blue "
                                 f"faster under {b}, vermillion slower, grey: alike)", values, alike))
    return overlays


def write_overlays(directory: Path, overlays: list[Overlay]) -> list[Path]:
    """Each overlay into ``directory`` as ``NN-SLUG.json`` (numbered in order), replacing what
    an earlier command wrote there."""
    directory.mkdir(parents=True, exist_ok=True)
    for stale in directory.glob("*.json"):
        stale.unlink()
    paths = []
    for number, overlay in enumerate(overlays, 1):
        path = directory / f"{number:02d}-{overlay.slug.replace(':', '.').replace('/', '_')}.json"
        path.write_text(strict_json.dumps(overlay.node_data(), indent=1) + "\n")
        paths.append(path)
    return paths
