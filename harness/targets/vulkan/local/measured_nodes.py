"""A device's measurements (:class:`costmodel.measurements.Measurements`) from its runs'
results directories: each program's node map and ETDumps read into one row per node, its GPU
time the median over the program's runtime processes of each one's median over its inferences."""

from pathlib import Path

import pandas as pd

from costmodel.device_limits import DeviceLimits
from costmodel.features import TRANSITION
from costmodel.measurements import (
    NODE_COLUMNS,
    PROGRAM_COLUMNS,
    Measurements,
    combined,
    one_device,
    read_measurements,
)
from harness.errors import UsageError
from harness.results.results_dir import ResultsDir
from harness.results.store import RecordStore
from harness.targets.vulkan.local.dispatches import STAGING, read_dispatches, read_node_map


def _program_nodes(pte: Path) -> tuple[pd.DataFrame, list[float]]:
    """A program's nodes, and each runtime process's summed time of them."""
    nodes = read_node_map(pte)
    per_process = []
    for etdump in ResultsDir.etdumps(pte):
        frame = read_dispatches(etdump, nodes)
        frame = frame[frame["operator"] != STAGING]
        per_process.append(frame.groupby(["partition", "node_id"])["gpu_ms"].sum())
    times = pd.concat(per_process, axis=1)
    rows = []
    for partition in nodes["partitions"]:
        for node_id, node in enumerate(partition["nodes"]):
            key = (partition["partition"], node_id)
            if key not in times.index:
                continue  # ran no dispatch (a prepack, a view that aliases)
            rows.append({"partition": partition["partition"], "graph": partition["graph"], "node": node["node"],
                         "operator": TRANSITION if node["transition"] else node["operator"],
                         "transition": node["transition"], "input": (node["inputs"] or [""])[0],
                         "output": node["output"] or "", "signature": node["signature"],
                         "ms": float(times.loc[key].median()), "processes": int(times.loc[key].notna().sum())})
    return pd.DataFrame(rows), [float(total) for total in times.sum()]


def measured(results_dirs: list[Path]) -> Measurements:
    """Every program (an ok vulkan-run record with ETDumps) in ``results_dirs``, each one run
    of one device, and its nodes, as described in the module."""
    frames, programs, devices, limits = [], [], set(), []
    for run, directory in enumerate(results_dirs):
        for record in RecordStore(directory).latest(target="vulkan-run", status="ok"):
            pte = ResultsDir(directory).program(record["model"], record["strategy"])
            if not (ResultsDir.beside(pte, "node_map").exists() and ResultsDir.etdumps(pte)):
                continue
            environment = record.get("environment") or {}
            devices.add(environment.get("vulkan_device") or "unknown")
            limits.append(environment.get("vulkan_limits"))
            nodes, process_ms = _program_nodes(pte)
            frames.append(nodes.assign(model=record["model"], strategy=record["strategy"], run=run))
            programs.append([run, record["model"], record["strategy"], environment.get("gpu_costs"), process_ms])
    if not frames:
        raise UsageError(f"{', '.join(map(str, results_dirs))}: no ok vulkan-run record with ETDumps: run "
                         "`layoutbench run --target vulkan-run` (or remote_runner.py and import-remote) first")
    return Measurements(one_device(devices), pd.concat(frames, ignore_index=True)[NODE_COLUMNS],
                        pd.DataFrame(programs, columns=PROGRAM_COLUMNS), DeviceLimits.common(limits))


def load_measurements(sources: list[Path], device: str | None = None) -> Measurements:
    """What results directories (one run each) and kept files (``.jsonl.gz``) measured, together
    (as ``device``'s, where runs of other devices stand in for it)."""
    directories = [Path(s) for s in sources if not Path(s).is_file()]
    parts = [read_measurements(Path(s)) for s in sources if Path(s).is_file()]
    parts += [measured(directories)] if directories else []
    return combined(parts, device)
