"""Where one strategy's program spends its GPU time, and what another strategy's choices
change: tables over the dispatches of an ET-VK run (``harness.targets.vulkan.dispatches``,
one row per dispatch, attributed by delegate node id).

Times are per inference: each dispatch's median over the inferences the ETDump holds.
The strategy's transitions are their own operator row ("transition"), so a model's own
clones stay under ``aten.clone.default``. Beside them, the run's latency as its record has
it (``harness.targets.vulkan.latency``: the runtime's own events in the same ETDump).
"""

from pathlib import Path

import pandas as pd

from harness.targets.vulkan.dispatches import STAGING, gpu_summary
from harness.targets.vulkan.latency import LATENCY_FIELDS

TRANSITION = "transition"


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
    columns = ["node", "operator", "kernel", "inputs", "output", "gpu_ms"]
    return frame.assign(operator=operator_kinds(frame)).nlargest(count, "gpu_ms")[columns].reset_index(drop=True)


def summary(frame: pd.DataFrame, record: dict) -> dict:
    """The GPU fields of this run, with its dispatch and transition counts, and the latency
    fields of its record."""
    return {**gpu_summary(frame), "dispatches": len(frame),
            "transitions": int(frame.loc[frame["transition"], "node"].nunique()),
            **{name: record.get(name) for name in LATENCY_FIELDS}}


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
