""":func:`explore` is the ``explore`` command's work: lower a model with one strategy (and a
second), lay each one's facts on Model Explorer's drawing of the model and write the
drawing (an ETRecord) and the overlays into the results directory; under a cost table, each
program's predicted time as explain states it (interval, share outside the table's support)."""

from dataclasses import dataclass
from pathlib import Path

from costmodel.table import CostTable
from harness.inspection.explain import explain
from harness.inspection.model_explorer import difference_overlays, strategy_overlays, write_overlays
from harness.inspection.node_facts import measured_dispatches, node_facts
from harness.pipeline.model import pipeline
from harness.quiet import output_to_stderr
from harness.results.prediction_trust import predicted_line
from harness.results.results_dir import ResultsDir
from harness.targets.vulkan.compile.etrecord import model_edge_graph


@dataclass(frozen=True)
class Explored:
    """What ``explore`` wrote: the drawing, the overlay files, and the partitions' nodes the
    drawing has no place for (ET-VK's prepacking of weights, by name), the strategies
    with no measured time (no vulkan-run of theirs with an ETDump in the results directory),
    and each strategy's predicted time in one line (none without a cost table)."""

    etrecord: Path
    overlays: list[Path]
    undrawn: list[str]
    unmeasured: list[str]
    predicted: list[str]


def explore(model: str, names: list[str], table: CostTable | None, results: str) -> Explored:
    """Write the model's drawing and the overlays of ``names`` (one strategy, or two to compare)."""
    explained, lowered = explain(model, names[0], names[1] if len(names) > 1 else None, table)
    with output_to_stderr():
        edge = model_edge_graph(pipeline(model))
    overlays, all_facts, undrawn, unmeasured, predicted = [], [], set(), [], []
    for name, program, prefix in zip(names, lowered, ("", "vs_")):
        dispatches = measured_dispatches(results, model, name)
        if dispatches is None:
            unmeasured.append(name)
        facts, missing = node_facts(program, edge, explained.get(f"{prefix}priced_nodes"), dispatches)
        summary = predicted_line(explained[f"{prefix}predicted"], table.device) if table is not None else None
        overlays += strategy_overlays(name, facts, summary)
        predicted += [f"{name}: {summary}"] if summary else []
        all_facts.append(facts)
        undrawn.update(missing)
    if len(names) > 1:
        overlays += difference_overlays((names[0], names[1]), *all_facts)
    directory = ResultsDir(results)
    etrecord = directory.etrecord(model)
    etrecord.parent.mkdir(parents=True, exist_ok=True)
    etrecord.write_bytes(edge.etrecord)
    paths = write_overlays(directory.overlays(model, names), overlays)
    return Explored(etrecord, paths, sorted(undrawn), unmeasured, predicted)
