"""Cost tables from the ETDumps vulkan-run keeps.

:func:`fit_cost_model` fits the cost model strategies and records predict GPU time with
(:class:`strategies.gpu_costs.CostTable`): every node's measured time in each pair of
representations it ran in; per (operator, representations) a fixed cost plus a cost per
output element, fitted by non-negative least squares over the measured nodes; transitions
per (from, to) as a fixed cost plus a cost per byte.

:func:`cost_table` is the descriptive table: GPU time per output element of every operator
kind in each representation the strategies gave it.

Each results directory is one run: per (device, operator, input representations, output
representation) its time per element is the summed GPU time of those dispatches over their
summed output elements, over every model and strategy of the run. Given several runs of the
same sweep, the table keeps the median over runs and their spread, (max - min) / median:
how far one run's number can be trusted. It is what a strategy that minimises time rather
than transitions would be built on.
"""

import json
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import nnls

from harness.errors import UsageError
from strategies.gpu_costs import CostTable, LinearCost

from harness.inspection.profile import by_representation, operator_kinds
from harness.results.results_dir import ResultsDir
from harness.results.store import RecordStore, latest
from harness.targets.vulkan.dispatches import STAGING
from harness.targets.vulkan.targets import program_dispatches

KEY = ["device", "operator", "inputs", "output"]


def run_dispatches(results_dir: Path, strategies=None) -> pd.DataFrame:
    """Every dispatch of every ok vulkan-run record with an ETDump (of ``strategies``, where
    given), with its model, strategy and device."""
    frames = []
    for record in latest(RecordStore(results_dir).read()):
        if record["target"] != "vulkan-run" or record["status"] != "ok":
            continue
        if strategies is not None and record["strategy"] not in strategies:
            continue
        pte = ResultsDir(results_dir).program(record["model"], record["strategy"])
        if not ResultsDir.beside(pte, "etdump").exists():
            continue
        frame = program_dispatches(pte)
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
    pairs = [set(zip(frame["model"], frame["strategy"])) for frame in dispatches]
    common = set.intersection(*pairs)
    if not common:
        raise FileNotFoundError(f"{', '.join(map(str, results_dirs))} have no (model, strategy) measured in all")
    runs = [_one_run(frame[[pair in common for pair in zip(frame["model"], frame["strategy"])]]).assign(run=i)
            for i, frame in enumerate(dispatches)]
    every = pd.concat(runs, ignore_index=True)
    grouped = every.groupby(KEY, dropna=False)
    table = grouped.agg(ns_per_element=("ns_per_element", "median"), low=("ns_per_element", "min"),
                        high=("ns_per_element", "max"), runs=("run", "nunique"), nodes=("nodes", "max"),
                        models=("models", "max"), elements=("elements", "max"))
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


def _fit(units: pd.Series, ms: pd.Series, prior: LinearCost | None = None) -> LinearCost:
    """ms = fixed + ns per unit, both non-negative. With one size only, the cost per unit is
    the ``prior``'s (the operator's over all representations, or all transitions') and the
    rest fixed, so a dispatch's fixed cost is not read as a cost per element; without a prior,
    all per unit (or all fixed where the size is 0)."""
    units, ms = units.to_numpy(dtype=float), ms.to_numpy(dtype=float)
    if len(np.unique(units)) < 2:
        size, median = float(units[0]), float(np.median(ms))
        if prior is not None:
            per_unit = min(prior.ns_per_unit, median / size * 1e6) if size else 0.0
            return LinearCost(median - per_unit * size * 1e-6, per_unit)
        return LinearCost(0.0, median / size * 1e6) if size else LinearCost(median, 0.0)
    (fixed, per_unit), _ = nnls(np.column_stack([np.ones_like(units), units * 1e-6]), ms)
    return LinearCost(float(fixed), float(per_unit))


def _fits(frame: pd.DataFrame, keys: list[str], units: str, prior=lambda key: None) -> dict:
    fits = {}
    for key, group in frame.groupby(keys, dropna=False):
        key = key if len(keys) > 1 else key[0]
        fits[key] = _fit(group[units], group["gpu_ms"], prior(key))
    return fits


def fit_cost_model(results_dirs: list[Path], strategies=None) -> CostTable:
    """The cost model of the runs in ``results_dirs`` (of one device), from the ETDumps of
    their ``strategies`` (all where None)."""
    frame = pd.concat([run_dispatches(Path(d), strategies).assign(run=i) for i, d in enumerate(results_dirs)],
                      ignore_index=True)
    devices = sorted(frame["device"].unique())
    if len(devices) != 1:
        raise UsageError(f"a cost table is of one device; these runs are of {', '.join(devices)}")
    frame = frame[frame["operator"] != STAGING].assign(
        input=frame["inputs"].fillna("").str.split(", ").str[0], output=frame["output"].fillna(""))
    # One time per node and program: a node may dispatch several kernels.
    per_node = frame.groupby(["run", "model", "strategy", "graph", "node", "transition", "operator", "input",
                              "output"], dropna=False).agg(gpu_ms=("gpu_ms", "sum"), elements=("elements", "first"),
                                                           bytes=("bytes", "first")).reset_index()
    operators = per_node[~per_node["transition"]]
    transitions = per_node[per_node["transition"]]
    nodes = operators.groupby(["graph", "node", "input", "output"])["gpu_ms"].median()
    pooled = _fits(operators, ["operator"], "elements")
    pooled_transition = _fit(transitions["bytes"], transitions["gpu_ms"]) if len(transitions) else None
    return CostTable(
        device=devices[0],
        nodes={key: float(ms) for key, ms in nodes.items()},
        operators=_fits(operators, ["operator", "input", "output"], "elements", lambda key: pooled[key[0]]),
        pooled=pooled,
        transitions=_fits(transitions, ["input", "output"], "bytes", lambda key: pooled_transition),
        pooled_transition=pooled_transition,
    )


def write_cost_model(table: CostTable, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(table.to_json(), indent=1) + "\n")
    return path
