"""Where one strategy's program spends its GPU time, and what another strategy's choices
change: tables over the dispatches of an ET-VK run (``harness.targets.vulkan.local.dispatches``,
one row per dispatch, attributed by delegate node id); :func:`profile_runs` is the ``profile``
command's work on the runs it made or found.

Times are per inference: each dispatch's median over the inferences the ETDump holds. The
strategy's transitions are their own operator row ("transition"), so a model's own clones
stay under ``aten.clone.default``. Beside them, the run's latency as its record has it
(``harness.targets.vulkan.local.latency``: the runtime's own events in the same ETDump), and
where a cost table priced the run, its predicted time as the record states it
(:mod:`harness.results.prediction_trust`), whether the measured time lies inside its
interval, and per kernel family the predicted time outside the table's support.
"""

from pathlib import Path

import pandas as pd

from harness.errors import UsageError
from harness.results.results_dir import ResultsDir
from harness.results.store import RecordStore
from harness.results.prediction_trust import predicted_line
from harness.results.table import format_number, tables_json
from harness.targets.vulkan.local.dispatches import STAGING, gpu_summary, program_dispatches
from harness.targets.vulkan.local.latency import LATENCY_FIELDS

TRANSITION = "transition"
PREDICTION_FIELDS = ("predicted_gpu_ms", "predicted_gpu_ms_low", "predicted_gpu_ms_high", "predicted_interval_level",
                     "predicted_outside_support", "predicted_outside_support_share")


def operator_kinds(frame: pd.DataFrame) -> pd.Series:
    """Each dispatch's operator, "transition" for the strategy's clones."""
    return frame["operator"].where(~frame["transition"], TRANSITION)


def by_operator(frame: pd.DataFrame) -> pd.DataFrame:
    """GPU time per operator kind, largest first, with its share of the total."""
    grouped = frame.assign(operator=operator_kinds(frame)).groupby("operator")
    table = pd.DataFrame({"dispatches": grouped.size(), "nodes": grouped["node"].nunique(),
                          "gpu_ms": grouped["gpu_ms"].sum()})
    table["share"] = table["gpu_ms"] / frame["gpu_ms"].sum()
    return table.sort_values("gpu_ms", ascending=False).reset_index()


def by_representation(frame: pd.DataFrame) -> pd.DataFrame:
    """GPU time per (operator, representations of its inputs -> output), with the time per
    output element: how an operator fares in each representation the strategy gave it."""
    nodes = frame.assign(operator=operator_kinds(frame)).groupby(["operator", "inputs", "output", "node"], dropna=False)
    per_node = nodes.agg(gpu_ms=("gpu_ms", "sum"), elements=("elements", "first"), dispatches=("gpu_ms", "size"))
    grouped = per_node.groupby(level=["operator", "inputs", "output"], dropna=False)
    table = pd.DataFrame({"nodes": grouped.size(), "dispatches": grouped["dispatches"].sum(),
                          "gpu_ms": grouped["gpu_ms"].sum(), "elements": grouped["elements"].sum()})
    table["ns_per_element"] = table["gpu_ms"] * 1e6 / table["elements"].where(table["elements"] > 0)
    return table.sort_values("gpu_ms", ascending=False).reset_index()


def top_dispatches(frame: pd.DataFrame, count: int = 10) -> pd.DataFrame:
    top = frame.assign(operator=operator_kinds(frame)).nlargest(count, "gpu_ms")
    return top[["node", "operator", "kernel", "inputs", "output", "gpu_ms"]].reset_index(drop=True)


def summary(frame: pd.DataFrame, record: dict) -> dict:
    """The GPU fields of this run, with its dispatch and transition counts, and the latency
    and prediction fields of its record."""
    return {**gpu_summary(frame), "dispatches": len(frame),
            "transitions": int(frame.loc[frame["transition"], "node"].nunique()),
            **{name: record.get(name) for name in (*LATENCY_FIELDS, *PREDICTION_FIELDS)}}


def measured_against_predicted(summary: dict) -> str | None:
    """The run's predicted time and the measured time it predicts (the operators' and
    transitions', ET-VK's copies of inputs and outputs aside): inside the interval the table
    states, or above or below it. None where no table priced the run."""
    if summary.get("predicted_gpu_ms") is None:
        return None
    measured = summary["gpu_dispatch_ms"] - summary["staging_gpu_ms"]
    line = f"{predicted_line(summary)}; measured {format_number(measured)} ms"
    if summary.get("predicted_gpu_ms_low") is None:
        return line
    low, high = summary["predicted_gpu_ms_low"], summary["predicted_gpu_ms_high"]
    return f"{line}, {'inside' if low <= measured <= high else 'above' if measured > high else 'below'} the interval"


def outside_support(summary: dict) -> pd.DataFrame:
    """Per kernel family outside the table's support, its predicted ms and share of the prediction."""
    outside = sorted((summary.get("predicted_outside_support") or {}).items(), key=lambda item: -item[1])
    return pd.DataFrame([(family, ms, ms / summary["predicted_gpu_ms"]) for family, ms in outside],
                        columns=["family", "predicted_ms", "share"])


def _per_node(frame: pd.DataFrame) -> pd.DataFrame:
    """The model's own nodes (not transitions, not staging): GPU time and representations of each."""
    own = frame[~frame["transition"] & (frame["operator"] != STAGING)]
    return own.groupby("node").agg(operator=("operator", "first"), inputs=("inputs", "first"),
                                   output=("output", "first"), gpu_ms=("gpu_ms", "sum"))


def versus(frame: pd.DataFrame, other: pd.DataFrame, names: tuple[str, str]) -> dict:
    """What changes from ``names[0]`` to ``names[1]``: per operator kind (transitions included)
    and per node of the model, with the representations each strategy gave the node; a
    positive ``delta_ms`` is slower under ``names[1]``."""
    first, second = names
    kinds = by_operator(frame).set_index("operator")["gpu_ms"].rename(f"{first}_ms").to_frame().join(
        by_operator(other).set_index("operator")["gpu_ms"].rename(f"{second}_ms"), how="outer").fillna(0.0)
    kinds["delta_ms"] = kinds[f"{second}_ms"] - kinds[f"{first}_ms"]
    nodes = _per_node(frame).join(_per_node(other), how="inner", lsuffix=f"_{first}", rsuffix=f"_{second}")
    nodes["delta_ms"] = nodes[f"gpu_ms_{second}"] - nodes[f"gpu_ms_{first}"]
    nodes["representation_changed"] = ((nodes[f"inputs_{first}"] != nodes[f"inputs_{second}"])
                                       | (nodes[f"output_{first}"] != nodes[f"output_{second}"]))
    columns = ["operator_" + first, f"inputs_{first}", f"output_{first}", f"inputs_{second}", f"output_{second}",
               f"gpu_ms_{first}", f"gpu_ms_{second}", "delta_ms"]
    changed = nodes[nodes["representation_changed"]][columns].rename(columns={"operator_" + first: "operator"})
    return {
        "operator_changes": kinds.sort_values("delta_ms", key=abs, ascending=False).reset_index(),
        "node_changes": changed.sort_values("delta_ms", key=abs, ascending=False).reset_index(),
        "representation_changes_ms": float(changed["delta_ms"].sum()),
    }


def chart(frames: dict[str, pd.DataFrame], title: str, path: Path, count: int = 15) -> Path:
    """A horizontal bar chart of GPU time per operator kind, one bar per strategy, for the
    ``count`` kinds with the most time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    table = pd.concat({name: by_operator(frame).set_index("operator")["gpu_ms"] for name, frame in frames.items()},
                      axis=1).fillna(0.0)
    table = table.loc[table.max(axis=1).nlargest(count).index[::-1]]
    figure, axes = plt.subplots(figsize=(9, 0.45 * len(table) + 1.5))
    table.plot.barh(ax=axes)
    axes.set_xlabel("GPU time per inference (ms)")
    axes.set_ylabel("")
    axes.set_title(title)
    figure.tight_layout()
    path = Path(path)
    figure.savefig(path)
    plt.close(figure)
    return path


def kept_dispatches(results, model: str, strategy: str) -> pd.DataFrame | None:
    """The dispatches of the strategy's program of ``model`` in ``results``, None where its run kept no ETDump."""
    program = ResultsDir(results).program(model, strategy)
    return program_dispatches(program) if ResultsDir.beside(program, "etdump").exists() else None


def recorded_runs(results: str, model: str, names: list[str]) -> list[dict]:
    """The latest vulkan-run record of each strategy in a results directory (another
    machine's runs, as import-remote wrote them), nothing run."""
    found = {r["strategy"]: r for r in RecordStore(results).latest(model=model, target="vulkan-run")
             if r["strategy"] in names}
    missing = [name for name in names if name not in found]
    if missing:
        raise UsageError(f"{results} has no vulkan-run record of {model} / {', '.join(missing)}; drop --recorded "
                         "to run it here")
    return [found[name] for name in names]


def profile_runs(results_dir: Path, model: str, names: list[str], records: list[dict], top: int) -> tuple[dict, dict]:
    """What ``profile`` shows of the vulkan-run ``records`` of ``names`` (in that order): the
    first strategy's GPU time per operator, representation and dispatch, and with a second,
    what its choices change; and the dispatches of each, by strategy, for the chart."""
    frames, summaries = {}, {}
    for record in records:
        strategy = record["strategy"]
        if record["status"] != "ok":
            raise UsageError(f"{model} / {strategy} on vulkan-run is {record['status']}: {record['reason']}")
        frames[strategy] = kept_dispatches(results_dir, model, strategy)
        if frames[strategy] is None:
            etdump = ResultsDir.beside(ResultsDir(results_dir).program(model, strategy), "etdump")
            raise UsageError(f"{etdump} is missing (the runtime wrote no ETDump, or it was deleted): build "
                             "executor_runner with -DEXECUTORCH_ENABLE_EVENT_TRACER=ON, or re-run with --fresh")
        summaries[strategy] = summary(frames[strategy], record)
    first = frames[names[0]]
    result = {"model": model, "strategy": names[0], "summary": summaries[names[0]],
              "outside_support": outside_support(summaries[names[0]]), "operators": by_operator(first),
              "representations": by_representation(first), "top_dispatches": top_dispatches(first, top)}
    if len(names) > 1:
        result.update(vs=names[1], vs_summary=summaries[names[1]], **versus(first, frames[names[1]], names[:2]))
    return result, frames


def render_profile(result: dict, output_format: str) -> str:
    """:func:`profile_runs`' result as text, or JSON."""
    if output_format == "json":
        return tables_json(result)

    def headline(label: str, summary: dict) -> list[str]:
        measured = (f"{label}: {summary['latency_ms_median']:.3f} ms per inference (p10 "
                    f"{summary['latency_ms_p10']:.3f}, p90 {summary['latency_ms_p90']:.3f}; "
                    f"{summary['latency_source']}), load {summary['load_ms']:.1f} ms; {summary['gpu_dispatch_ms']:.3f} "
                    f"ms of GPU dispatches per inference ({summary['dispatches']} dispatches); "
                    f"{summary['transitions']} transitions {summary['transition_gpu_ms']:.3f} ms = "
                    f"{100 * (summary['transition_time_share'] or 0):.2f} %")
        return [measured, *filter(None, [measured_against_predicted(summary)])]

    def table(frame: pd.DataFrame) -> str:
        return frame.to_string(index=False, float_format=format_number) if len(frame) else "(none)"

    outside = result["outside_support"]
    lines = [*headline(f"{result['model']} / {result['strategy']}", result["summary"]), "",
             *(["predicted time outside the table's support, per kernel family:", table(outside), ""]
               if len(outside) else []),
             "GPU time per operator:", table(result["operators"]), "",
             "per operator and representation (inputs -> output):", table(result["representations"]), "",
             "top dispatches:", table(result["top_dispatches"])]
    if "vs" in result:
        lines += ["", *headline(result["vs"], result["vs_summary"]), "",
                  f"per operator, {result['strategy']} -> {result['vs']} (delta > 0: slower under {result['vs']}):",
                  table(result["operator_changes"]), "",
                  f"nodes {result['vs']} represents differently ({result['representation_changes_ms']:+.3f} ms "
                  "in all):", table(result["node_changes"])]
    return "\n".join(lines)
