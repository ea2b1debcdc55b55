"""Why each transition exists, and where two strategies disagree.

Rows are read off a lowered program: every clone the pass inserted (the same ones
``metrics.transitions`` counts), each reader of that clone with the argument it feeds, and
the reader's registration (a fresh ``OpRepSets``) to say what ruled out reading the source
as it is: the argument's accepted set, the output the argument is synced with, or the
sync of the reader's arguments. A transition none of these forces is the strategy's choice.
Under a cost table, each program's predicted time as its record states it (interval, share
outside the table's support: :mod:`harness.results.prediction_trust`) and every node the table
prices, with the kernel family of those outside its support.
:func:`explain` is the ``explain`` command's work: lower, validate, tabulate.
"""

import executorch.backends.vulkan.utils as vk_utils
import pandas as pd
import torch
from executorch.backends.vulkan.op_registry import get_op_features

from costmodel.prediction import Prediction
from costmodel.signatures import op_name
from costmodel.table import CostTable
from harness.inspection.kernel_coverage import lowered_program, priced_queries
from harness.quiet import output_to_stderr
from harness.results.prediction_trust import difference_note, predicted_line
from harness.results.table import format_number, tables_json
from harness.targets.vulkan.compile import validator
from harness.targets.vulkan.compile.lowering import LoweredProgram
from harness.targets.vulkan.compile.metrics import is_transition, partition_transitions, predicted_gpu_time
from strategies.representations import (
    as_pair,
    filtered,
    first_repr,
    node_reprs,
    packed_dim_info,
    repr_name,
    repset_name,
    repset_packed_dim_infos,
)

PRICED_COLUMNS = ("partition", "node", "operator", "predicted_ms", "measured", "error", "outside_support")
TRANSITION_COLUMNS = ("partition", "source", "before", "after", "consumer", "arg_index", "consumer_op", "forced",
                      "constraint", "shape", "dtype", "bytes", "clone")


def constraint(reader, arg_index: int, source_repr, repsets: vk_utils.OpRepSets, dtype) -> tuple[bool, str]:
    """(forced, why): what in the reader's registration rules out reading the source as it
    is. Forced means no choice of the strategy could have avoided it at this reader."""
    name = op_name(reader.target)
    accepted = filtered(repsets.get_arg_repset(arg_index), dtype)
    if not accepted.is_compatible(source_repr):
        return True, f"{name} arg {arg_index} accepts {repset_name(accepted)}"
    source_info = packed_dim_info(as_pair(source_repr))
    if repsets.sync_primary_io_repr and arg_index == repsets.primary_arg_idx:
        output = filtered(repsets.get_out_repset(0), dtype)
        if source_info not in repset_packed_dim_infos(output):
            return True, f"{name} syncs input and output; its output accepts {repset_name(output)}"
        return False, f"{name} syncs input and output; the strategy tagged the output {repr_name(first_repr(reader))}"
    tensor_args = [a for a in reader.args if isinstance(a, (torch.fx.Node, list, tuple))]
    if repsets.sync_args_repr and len(tensor_args) > 1:
        return False, f"{name} syncs its arguments; the strategy chose another packed dim for them"
    return False, "strategy's choice"


def transitions_table(lowered: LoweredProgram) -> pd.DataFrame:
    """One row per transition the strategy inserted, with the readers that needed it
    (readers sharing one clone are joined with ``;``)."""
    rows = []
    for index, partition in enumerate(lowered.partitions):
        nodes = {node.name: node for node in partition.program.graph.nodes}
        for transition in partition_transitions(index, partition):
            clone = nodes[transition.node]
            source_repr = first_repr(clone.args[0])
            dtype = clone.meta["val"].dtype
            readers, ops, arg_indices, reasons = [], [], [], []
            for reader in clone.users:
                repsets = get_op_features(reader.target).make_op_repsets(reader, partition.texture_limits)
                for i, arg in enumerate(reader.args):
                    if clone in (arg if isinstance(arg, (list, tuple)) else [arg]):
                        readers.append(reader.name)
                        ops.append(op_name(reader.target))
                        arg_indices.append(str(i))
                        reasons.append(constraint(reader, i, source_repr, repsets, dtype))
            rows.append({
                "partition": index, "clone": transition.node, "source": transition.source,
                "consumer": "; ".join(readers), "arg_index": "; ".join(arg_indices),
                "consumer_op": "; ".join(ops), "before": transition.before, "after": transition.after,
                "shape": "x".join(map(str, transition.shape)), "dtype": transition.dtype,
                "bytes": transition.bytes, "forced": any(forced for forced, _ in reasons),
                "constraint": "; ".join(dict.fromkeys(why for _, why in reasons)),
            })
    return pd.DataFrame(rows, columns=list(TRANSITION_COLUMNS))


def node_representations(lowered: LoweredProgram) -> pd.Series:
    """The representation of every tagged node that existed before the pass, by
    (partition, node); multi-output nodes list one per output."""
    reprs = {}
    for index, partition in enumerate(lowered.partitions):
        for node in partition.program.graph.nodes:
            if (is_transition(node, partition.prefix_node_names)
                    or not vk_utils.has_node_spec_attr(node, "etvk_node_repr") or vk_utils.get_node_repr(node) is None):
                continue
            reprs[(index, node.name)] = ", ".join(repr_name(r) for r in node_reprs(node) if r is not None)
    return pd.Series(reprs, name="representation", dtype=object)


def priced_nodes(lowered: LoweredProgram, table: CostTable) -> pd.DataFrame:
    """Every node ``table`` prices in the program (a transition as the node whose output it
    copies): its predicted ms, whether measured on this model or fitted with the fit's expected
    error, and the kernel family of a fitted node outside the table's support (else missing)."""
    rows = [(index, name, operator, price.ms, price.measured, price.error,
             next(iter(Prediction.of([query], [price], table.support).outside), None))
            for index, name, operator, query, price in priced_queries(lowered, table)]
    return pd.DataFrame(rows, columns=list(PRICED_COLUMNS))


def compare_strategies(lowered: LoweredProgram, other: LoweredProgram, names: tuple[str, str]):
    """(nodes whose representation differs, transitions only one strategy has)."""
    first, second = node_representations(lowered), node_representations(other)
    both = pd.concat([first.rename(names[0]), second.rename(names[1])], axis=1, join="inner")
    differing = both[both[names[0]] != both[names[1]]].rename_axis(["partition", "node"]).reset_index()

    def keyed(table):
        return table.set_index(["partition", "source", "after"])

    a, b = keyed(transitions_table(lowered)), keyed(transitions_table(other))
    only_a = a.loc[a.index.difference(b.index)].reset_index().assign(only_in=names[0])
    only_b = b.loc[b.index.difference(a.index)].reset_index().assign(only_in=names[1])
    return differing, pd.concat([only_a, only_b], ignore_index=True)


def explain(model: str, strategy: str, vs: str | None = None,
            costs: CostTable | None = None) -> tuple[dict, list[LoweredProgram]]:
    """Lower ``model`` with ``strategy`` (and ``vs``; a strategy that prices its choices with
    the cost table ``costs``), validate each program, and say why each transition of the first
    exists (and, with ``vs``, where the two disagree); the result and the lowered programs."""
    names = [strategy] + ([vs] if vs else [])
    lowered = [lowered_program(model, name, costs) for name in names]  # of the process's one lowering prefix
    with output_to_stderr():
        for program in lowered:
            validator.validate(program)
    return explanation(model, names, lowered, costs), lowered


def explanation(model: str, names: list[str], lowered: list[LoweredProgram], costs: CostTable | None) -> dict:
    """Why each transition of the first program exists (and, given a second, where the two
    disagree); under ``costs``, what each is predicted to take and which nodes lie outside the
    table's support."""
    result = {"model": model, "strategy": names[0], "transitions": transitions_table(lowered[0])}
    for prefix, program in zip(("", "vs_"), lowered if costs is not None else []):
        result.update({"device": costs.device, f"{prefix}predicted": predicted_gpu_time(program, costs),
                       f"{prefix}priced_nodes": priced_nodes(program, costs)})
    if len(names) > 1:
        differing, only_one = compare_strategies(lowered[0], lowered[1], (names[0], names[1]))
        if costs is not None:  # a node's families outside the support under either strategy
            priced = pd.concat([result["priced_nodes"], result["vs_priced_nodes"]]).dropna(subset=["outside_support"])
            families = priced.groupby(["partition", "node"])["outside_support"].agg(lambda f: "; ".join(sorted(set(f))))
            differing["outside_support"] = [families.get(node, "") for node in
                                            zip(differing["partition"], differing["node"])]
        result.update(vs=names[1], vs_transitions=len(transitions_table(lowered[1])),
                      differing_nodes=differing, transitions_only_in_one=only_one)
    return result


def _predictions(result: dict) -> list[str]:
    """The predicted time of each program, the nodes outside the support of the first, and
    the predicted difference (where it lies mostly outside the support, saying so)."""
    if "predicted" not in result:
        return []
    outside = result["priced_nodes"].dropna(subset=["outside_support"])
    lines = ["", f"{result['strategy']}: {predicted_line(result['predicted'], result['device'])}"]
    if len(outside):
        lines += ["nodes outside the table's support:",
                  outside[["partition", "node", "operator", "outside_support", "predicted_ms"]].to_string(
                      index=False, float_format=format_number)]
    if "vs_predicted" in result:
        first, second = result["predicted"], result["vs_predicted"]
        difference = second["predicted_gpu_ms"] - first["predicted_gpu_ms"]
        lines += [f"{result['vs']}: {predicted_line(second, result['device'])}",
                  "; ".join(filter(None, [f"predicted difference, {result['vs']} less {result['strategy']}: "
                                          f"{difference:+.4g} ms", difference_note(first, second)]))]
    return lines


def render_explanation(result: dict, output_format: str) -> str:
    """:func:`explain`'s result as a table, or JSON."""
    if output_format == "json":
        return tables_json(result)
    table = result["transitions"]
    lines = [
        f"{result['model']} / {result['strategy']}: {len(table)} transitions ({int(table['forced'].sum())} forced "
        f"by the reader's registration, the rest follow the strategy's own choices), {int(table['bytes'].sum())} bytes",
        table.drop(columns=["partition"]).to_string(index=False) if len(table) else "(none)",
    ]
    if "vs" in result:
        differing, only_one = result["differing_nodes"], result["transitions_only_in_one"]
        lines += [
            "",
            f"{result['vs']}: {result['vs_transitions']} transitions; {len(differing)} nodes tagged differently:",
            differing.to_string(index=False) if len(differing) else "(none)",
            "",
            "transitions only one strategy has:",
            only_one[["only_in", "source", "before", "after", "consumer", "constraint"]].to_string(index=False)
            if len(only_one) else "(none)",
        ]
    return "\n".join(lines + _predictions(result))
