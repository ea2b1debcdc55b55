"""The descriptive cost table (the ``costs`` command) from the ETDumps vulkan-run keeps: GPU
time per output element of every operator kind in each representation the strategies gave
it. (The cost model that predicts and optimises time is :mod:`costmodel`'s.)

Each results directory is one run: per (device, operator, input representations, output
representation) its time per element is the summed GPU time of those dispatches over their
summed output elements, over every model and strategy of the run. Given several runs of the
same sweep, the table keeps the median over runs and their spread, (max - min) / median:
how far one run's number can be trusted. It is what a strategy that minimises time rather
than transitions would be built on.
"""

from pathlib import Path

import pandas as pd

from harness.inspection.profile import by_representation, kept_dispatches, operator_kinds
from harness.results.store import RecordStore
from harness.targets.vulkan.local.dispatches import STAGING

KEY = ["device", "operator", "inputs", "output"]


def run_dispatches(results_dir: Path) -> pd.DataFrame:
    """Every dispatch of every ok vulkan-run record with an ETDump, with its model, strategy and device."""
    frames = []
    for record in RecordStore(results_dir).latest(target="vulkan-run", status="ok"):
        frame = kept_dispatches(results_dir, record["model"], record["strategy"])
        if frame is not None:
            device = (record.get("environment") or {}).get("vulkan_device") or "unknown"
            frames.append(frame.assign(model=record["model"], strategy=record["strategy"], device=device))
    if not frames:
        raise FileNotFoundError(f"{results_dir} has no ok vulkan-run record with an ETDump: run "
                                f"`layoutbench run --target vulkan-run --out {results_dir}` with an executor_runner "
                                "built with the event tracer")
    return pd.concat(frames, ignore_index=True)


def _one_run(dispatches: pd.DataFrame) -> pd.DataFrame:
    # Nodes of different models share names: a node is (model, strategy, node). Staging
    # copies belong to no node and no representation.
    dispatches = dispatches[dispatches["operator"] != STAGING]
    frame = dispatches.assign(node=dispatches["model"] + "/" + dispatches["strategy"] + "/" + dispatches["node"])
    models = frame.assign(operator=operator_kinds(frame)).groupby(KEY, dropna=False)["model"].nunique()
    tables = [by_representation(part).assign(device=device) for device, part in frame.groupby("device")]
    return pd.concat(tables, ignore_index=True).join(models.rename("models"), on=KEY)


def cost_table(results_dirs: list[Path]) -> pd.DataFrame:
    """The cost table over one or more runs (results directories), on the (model, strategy)
    pairs every run measured, so that runs differ only by their noise."""
    dispatches = [run_dispatches(Path(d)) for d in results_dirs]
    common = set.intersection(*(set(zip(frame["model"], frame["strategy"])) for frame in dispatches))
    if not common:
        raise FileNotFoundError(f"{', '.join(map(str, results_dirs))} have no (model, strategy) measured in all")
    runs = [_one_run(frame[[pair in common for pair in zip(frame["model"], frame["strategy"])]]).assign(run=i)
            for i, frame in enumerate(dispatches)]
    table = pd.concat(runs, ignore_index=True).groupby(KEY, dropna=False).agg(
        ns_per_element=("ns_per_element", "median"), low=("ns_per_element", "min"), high=("ns_per_element", "max"),
        runs=("run", "nunique"), nodes=("nodes", "max"), models=("models", "max"), elements=("elements", "max"))
    table["spread"] = (table["high"] - table["low"]) / table["ns_per_element"]
    return table.drop(columns=["low", "high"]).sort_values(["device", "operator", "ns_per_element"]).reset_index()


def write(table: pd.DataFrame, path: Path) -> Path:
    """As CSV, or JSON records for a ``.json`` path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".json":
        path.write_text(table.to_json(orient="records", indent=1))
    else:
        table.to_csv(path, index=False)
    return path
