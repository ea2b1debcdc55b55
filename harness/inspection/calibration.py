"""A device's cost table from its runs, and how well it predicts models it never saw.

:func:`measured` reads what a device's runs measured (:class:`Measurements`): one row per node
of every program (operators and transitions; ET-VK's copies of inputs and outputs aside) with
its signature, the representations it read and wrote, and its GPU time, the median over the
program's runtime processes of each one's median over its inferences.
:func:`write_measurements` keeps them as one file (the calibration's kept runs: JSON Lines,
gzipped), which :func:`read_measurements` reads back; everything below starts from them.

:func:`fit` makes the table (:class:`strategies.gpu_costs.CostTable`): the measured prices of
every (node, input, output), power-law bases of each operator's time in its work, and
gradient-boosted trees (LightGBM) of log2(ms / base) over :mod:`strategies.cost_features`,
weighted so a node counts by its time (:class:`strategies.gpu_costs.GradientBoostedModel`), and the relative
error the fit is expected to make per operator on a model it never saw: the trees refitted
with a few models left out at a time, each left-out model's time of each operator predicted
and compared with what it measured (the median of those errors over models).

How well a table predicts a model it never saw is :mod:`harness.inspection.validation`'s.
"""

import gzip
import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from harness.errors import UsageError
from harness.results.results_dir import ResultsDir
from harness.results.store import RecordStore, latest
from harness.targets.vulkan.dispatches import STAGING, read_dispatches
from harness.targets.vulkan.targets import read_node_map
from strategies.cost_features import FEATURES, TRANSITION, GraphLoad, node_features
from strategies.device_limits import DeviceLimits
from strategies.gpu_costs import ANY, MEGA_LOG2, CostTable, GradientBoostedModel, Query, effective_log_work

NODE_COLUMNS = ["model", "strategy", "run", "partition", "graph", "node", "operator", "transition", "input", "output",
                "signature", "ms", "processes"]
PROGRAM = ["run", "model", "strategy"]
PROGRAM_COLUMNS = [*PROGRAM, "costs", "process_ms"]  # the table it was lowered under; each process's summed time


@dataclass
class Measurements:
    """What one device's runs measured: a row per node (``NODE_COLUMNS``) and per program
    (``PROGRAM_COLUMNS``); the device's limits where its runs read them."""

    device: str
    nodes: pd.DataFrame
    programs: pd.DataFrame
    limits: DeviceLimits | None = None

    def without(self, model: str) -> "Measurements":
        return replace(self, nodes=self.nodes[self.nodes["model"] != model],
                       programs=self.programs[self.programs["model"] != model])
FOLDS = 5  # models left out together when the fit's expected errors are measured
ERROR_QUANTILE = 0.5  # of the per-model errors of an operator: the error expected of it
SPREAD_QUANTILE = 0.9  # of the programs' ranges over their runs: the spread a table carries
GRAPH_LOAD = ("log_graph_weight_bytes", "log_graph_largest_activation")
BOOSTING = {
    "objective": "regression", "learning_rate": 0.05, "num_leaves": 31, "min_data_in_leaf": 5,
    "feature_fraction": 0.9, "lambda_l2": 1.0, "max_cat_to_onehot": 64, "cat_smooth": 5,
    "deterministic": True, "force_row_wise": True, "num_threads": 1, "seed": 0, "verbose": -1,
    # A graph holding more never makes a node faster, and slows an operator's nodes whatever
    # their shapes: unconstrained, the trees use the graph's weights with shapes to tell the
    # corpus's models apart (leave one model out: median error 4.6 % against 3.3 %).
    "monotone_constraints": [int(feature in GRAPH_LOAD) for feature in FEATURES],
    "interaction_constraints": [[i for i, feature in enumerate(FEATURES) if feature not in GRAPH_LOAD],
                                [FEATURES.index(feature) for feature in ("operator", "int8", *GRAPH_LOAD)]],
}
ROUNDS = 600


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
        for record in latest(RecordStore(directory).read()):
            if record["target"] != "vulkan-run" or record["status"] != "ok":
                continue
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
    return Measurements(_one_device(devices), pd.concat(frames, ignore_index=True)[NODE_COLUMNS],
                        pd.DataFrame(programs, columns=PROGRAM_COLUMNS), DeviceLimits.common(limits))


def _one_device(devices: set) -> str:
    if len(devices) != 1:
        raise UsageError(f"a cost table is of one device; these runs are of {', '.join(sorted(devices))}")
    return devices.pop()


def write_measurements(measurements: Measurements, path: Path) -> Path:
    """Gzipped JSON Lines: a header (the device, its limits where known, the columns, the
    programs), then a line per node."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    header = {"device": measurements.device, "columns": NODE_COLUMNS, "program_columns": PROGRAM_COLUMNS,
              "programs": measurements.programs[PROGRAM_COLUMNS].values.tolist()}
    if measurements.limits is not None:
        header["limits"] = measurements.limits.to_json()
    with gzip.open(path, "wt") as out:
        out.write(json.dumps(header) + "\n")
        for row in measurements.nodes[NODE_COLUMNS].itertuples(index=False):
            out.write(json.dumps(list(row)) + "\n")
    return path


def read_measurements(path: Path) -> Measurements:
    try:
        with gzip.open(path, "rt") as lines:
            header = json.loads(next(lines))
            nodes = pd.DataFrame([json.loads(line) for line in lines], columns=header["columns"])
        programs = pd.DataFrame(header["programs"], columns=header["program_columns"])
        return Measurements(header["device"], nodes, programs, DeviceLimits.common([header.get("limits")]))
    except (OSError, ValueError, KeyError, StopIteration) as error:
        raise UsageError(f"{path} holds no measurements written by `layoutbench calibrate --nodes` ({error})") from None


def load_measurements(sources: list[Path]) -> Measurements:
    """What results directories (one run each) and kept files (``.jsonl.gz``) measured, together."""
    directories = [Path(s) for s in sources if not Path(s).is_file()]
    parts = [read_measurements(Path(s)) for s in sources if Path(s).is_file()]
    parts += [measured(directories)] if directories else []
    device = _one_device({part.device for part in parts})
    runs = 0
    for part in parts:  # runs numbered anew, so that two sources' runs stay apart
        part.nodes["run"] += runs
        part.programs["run"] += runs
        runs = int(part.programs["run"].max()) + 1
    return Measurements(device, pd.concat([p.nodes for p in parts], ignore_index=True),
                        pd.concat([p.programs for p in parts], ignore_index=True),
                        DeviceLimits.common([part.limits for part in parts]))


def _graph_loads(frame: pd.DataFrame) -> dict:
    """Per graph of ``frame`` (whole graphs' nodes), its :class:`GraphLoad`."""
    nodes = frame[~frame["transition"]].drop_duplicates(["graph", "node"])
    return nodes.groupby("graph")["signature"].agg(GraphLoad.of).to_dict()


def queries(frame: pd.DataFrame) -> list[Query]:
    loads = _graph_loads(frame)
    return [Query(row.signature, row.input, row.output, row.transition, row.graph, row.node,
                  loads.get(row.graph, GraphLoad())) for row in frame.itertuples(index=False)]


def _training_set(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per (graph, node, input, output) measured: its median time over the programs
    and runs that measured it. A transition is its program's own (clones of two programs
    share names, not tensors)."""
    frame = frame.assign(key=frame["node"].where(~frame["transition"], frame["strategy"] + "/" + frame["node"]))
    key = ["graph", "key", "transition", "input", "output"]
    first = frame.drop_duplicates(key).set_index(key)
    medians = frame.groupby(key)["ms"].median()
    return first.drop(columns="ms").join(medians).reset_index().drop(columns="key")


MIN_SIZES = 3  # distinct amounts of work a base line is fitted from; fewer: the operator's line


EXPONENTS = (0.2, 1.2)


def _line(log_work: np.ndarray, ms: np.ndarray) -> tuple[float, float, float]:
    """ms = c * (work / 2**20) ** b, by least squares of log2(ms) (b held within EXPONENTS): c, b
    and the sum of squared residuals."""
    x, y = log_work - MEGA_LOG2, np.log2(ms)
    b = float(np.clip(np.polyfit(x, y, 1)[0], *EXPONENTS)) if np.ptp(x) > 0 else 1.0
    residuals = y - b * x
    return float(np.exp2(np.mean(residuals))), b, float(np.var(residuals) * len(residuals))


PARALLEL_LOG2 = (None, *range(0, 25, 2))  # outputs a dispatch computes at once, tried per base line


def _base_line(group: pd.DataFrame) -> tuple[float, float, float | None]:
    """The base line of one group of nodes (see :func:`strategies.gpu_costs.effective_log_work`):
    of the parallel widths tried, the one whose line fits the group's times best."""
    best = None
    for log_parallel in PARALLEL_LOG2 if group["log_serial"].any() else (None,):
        log_work = effective_log_work(group["log_work"].to_numpy(), group["log_serial"].to_numpy(),
                                      group["log_output_elements"].to_numpy(),
                                      np.nan if log_parallel is None else log_parallel)
        c, b, misfit = _line(log_work, group["ms"].to_numpy())
        if best is None or misfit < best[0] - 1e-9:
            best = (misfit, (c, b, log_parallel))
    return best[1]


def _base(training: pd.DataFrame, features: pd.DataFrame) -> dict:
    """Base lines (see :class:`GradientBoostedModel`) per (operator, input, output) measured at
    enough sizes, per operator, and over everything."""
    frame = pd.DataFrame({"operator": features["operator"].astype(str).to_numpy(), "input": training["input"].to_numpy(),
                          "output": training["output"].to_numpy(), "log_work": features["log_work"].to_numpy(),
                          "log_serial": features["log_serial"].to_numpy(),
                          "log_output_elements": features["log_output_elements"].to_numpy(),
                          "ms": training["ms"].to_numpy()})
    base = {(ANY, ANY, ANY): _base_line(frame.assign(log_serial=0.0))}
    for operator, group in frame.groupby("operator"):
        base[(operator, ANY, ANY)] = _base_line(group)
    for (operator, first, second), group in frame.groupby(["operator", "input", "output"]):
        if group["log_work"].nunique() >= MIN_SIZES:
            base[(operator, first, second)] = _base_line(group)
    return base


def _boost(training: pd.DataFrame) -> GradientBoostedModel:
    import lightgbm

    features = pd.DataFrame([node_features(q.signature, q.input, q.output, q.transition, q.load)
                             for q in queries(training)],
                            columns=list(FEATURES))
    operators = sorted(features["operator"].unique())
    features["operator"] = pd.Categorical(features["operator"], categories=operators)
    model = GradientBoostedModel("", operators, _base(training, features))
    ms = training["ms"].to_numpy()
    base = model.base_ms(features.assign(input_name=training["input"].to_numpy(),
                                         output_name=training["output"].to_numpy()))
    dataset = lightgbm.Dataset(features, label=np.log2(ms / base), weight=np.sqrt(ms / ms.mean()),
                               categorical_feature=["operator"], free_raw_data=False)
    model.booster_text = lightgbm.train(BOOSTING, dataset, num_boost_round=ROUNDS).model_to_string()
    return model


def operator_errors(frame: pd.DataFrame, predicted: np.ndarray) -> pd.DataFrame:
    """Per (model, operator): |sum predicted - sum measured| / sum measured over the model's
    programs' nodes of that operator."""
    summed = frame.assign(predicted=predicted).groupby(["model", "operator"])[["predicted", "ms"]].sum()
    return ((summed["predicted"] - summed["ms"]).abs() / summed["ms"]).rename("error").reset_index()


PROBES_PER_OPERATOR = 12


def _probes(training: pd.DataFrame) -> dict:
    """Per operator, up to :data:`PROBES_PER_OPERATOR` nodes measured in two pairs or more,
    spread over their sizes, each with the pairs it was measured in."""
    nodes = training[~training["transition"]]
    loads = _graph_loads(training)
    probes = {}
    for operator, group in nodes.groupby("operator"):
        pairs = group.groupby(["graph", "node"]).apply(lambda g: sorted(zip(g["input"], g["output"])),
                                                        include_groups=False)
        several = pairs[pairs.map(len) >= 2]
        if several.empty:
            continue
        first = group.drop_duplicates(["graph", "node"]).set_index(["graph", "node"]).loc[several.index]
        sizes = first["signature"].map(lambda s: np.prod(s["outputs"][0]) if s["outputs"] else 0).sort_values(
            kind="stable")
        chosen = sizes.index[np.linspace(0, len(sizes) - 1, min(PROBES_PER_OPERATOR, len(sizes))).round().astype(int)]
        probes[operator] = [{"signature": first.loc[key, "signature"], "pairs": [list(p) for p in several.loc[key]],
                             "load": asdict(loads.get(key[0], GraphLoad()))}
                            for key in dict.fromkeys(chosen)]
    return probes


def measured_prices(frame: pd.DataFrame, training: pd.DataFrame | None = None) -> dict:
    """The measured price of each (graph, node, input, output) of ``frame``'s operator nodes:
    its median time over the programs and runs that measured it."""
    training = _training_set(frame) if training is None else training
    return {(r.graph, r.node, r.input, r.output): float(r.ms) for r in training.itertuples(index=False)
            if not r.transition}


def _fold_of(models: list[str], folds: int) -> dict:
    return {model: index % folds for index, model in enumerate(sorted(models))}


def fit(measurements: Measurements, folds: int = FOLDS) -> CostTable:
    """The cost table of ``measurements`` (see the module)."""
    frame = measurements.nodes
    training = _training_set(frame)
    table = CostTable(measurements.device, _boost(training), measured_prices(frame, training),
                      limits=measurements.limits)
    models = sorted(frame["model"].unique())
    folds = min(folds, len(models))
    fold = frame["model"].map(_fold_of(models, max(folds, 1)))
    errors = []
    for held_out in sorted(fold.unique()) if folds > 1 else []:
        kept, left = frame[fold != held_out], frame[fold == held_out]
        model = _boost(_training_set(kept))
        errors.append(operator_errors(left, model.predict(queries(left))))
    if errors:
        by_operator = pd.concat(errors).groupby("operator")["error"].quantile(ERROR_QUANTILE)
        table.errors = {op: float(error) for op, error in by_operator.items()}
    table.probes = _probes(training)
    table.spread = program_spread(measurements.programs)
    table.corpus = {"models": models, "programs": len(measurements.programs),
                    "runs": int(measurements.programs["run"].nunique()), "nodes": len(table.nodes)}
    return table.identified()


def program_spread(programs: pd.DataFrame) -> float:
    """How much runs of one program differ: the range of its processes' summed times over their
    median, at the ``SPREAD_QUANTILE`` of the measured programs (0 with none run twice)."""
    ranges = [(max(ms) - min(ms)) / float(np.median(ms)) for ms in programs["process_ms"] if len(ms) > 1]
    return float(np.quantile(ranges, SPREAD_QUANTILE)) if ranges else 0.0
