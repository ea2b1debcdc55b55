"""What one device's runs measured, as the fit reads it (:class:`Measurements`), and its file
(the calibration's kept runs, gzipped JSON Lines). Reading them from a run's ETDumps is the
Vulkan target's (:mod:`harness.targets.vulkan.local.measured_nodes`)."""

import gzip
import json
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd

from costmodel.device_limits import DeviceLimits
from layoutkit.errors import UsageError

NODE_COLUMNS = ["model", "strategy", "run", "partition", "graph", "node", "operator", "transition", "input", "output",
                "signature", "ms", "processes"]
PROGRAM = ["run", "model", "strategy"]
PROGRAM_COLUMNS = [*PROGRAM, "costs", "process_ms"]  # the table it was lowered under; each process's summed time


@dataclass
class Measurements:
    """What one device's runs measured: a row per node of every program (``NODE_COLUMNS``:
    operators and transitions, ET-VK's copies of inputs and outputs aside, with its signature,
    the representations it read and wrote and its GPU time) and per program
    (``PROGRAM_COLUMNS``); the device's limits where its runs read them; ``measured_on``: where
    runs of other devices stand in for it (:func:`combined`), every device the runs were of."""

    device: str
    nodes: pd.DataFrame
    programs: pd.DataFrame
    limits: DeviceLimits | None = None
    measured_on: tuple[str, ...] = ()

    def of_models(self, models, kept: bool = True) -> "Measurements":
        """The part of these measurements of ``models``' programs (``kept`` False: of every other
        model's), their rows in order and their index kept."""
        models = list(models)
        return replace(self, nodes=self.nodes[self.nodes["model"].isin(models) == kept],
                       programs=self.programs[self.programs["model"].isin(models) == kept])

    def left_out(self, models=None, folds: int | None = None) -> Iterator[tuple[list, "Measurements", "Measurements"]]:
        """Models left out in turn: ``models`` (default: every model whose nodes were measured, in
        name order) dealt into ``folds`` groups (default: each model alone); per group, its models,
        the measurements of every other model and its own."""
        models = sorted(self.nodes["model"].unique()) if models is None else list(models)
        folds = folds or len(models)
        for index in range(min(folds, len(models))):
            group = models[index::folds]
            yield group, self.of_models(group, kept=False), self.of_models(group)


def one_device(devices: set) -> str:
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
    if measurements.measured_on:
        header["measured_on"] = list(measurements.measured_on)
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
        return Measurements(header["device"], nodes, programs, DeviceLimits.common([header.get("limits")]),
                            tuple(header.get("measured_on", ())))
    # EOFError: a file cut short (gzip's end-of-stream marker missing); zlib.error: damaged inside
    except (OSError, EOFError, zlib.error, ValueError, KeyError, StopIteration) as error:
        raise UsageError(f"{path} holds no measurements written by `layoutbench calibrate --nodes` ({error})") from None


def combined(parts: list[Measurements], device: str | None = None) -> Measurements:
    """Measurements of several sources together, of one device (or, named, of ``device``: runs of
    devices ET-VK runs alike standing in for it); their runs numbered anew, so that two sources'
    runs stay apart."""
    devices = {d for part in parts for d in (part.measured_on or [part.device])}
    measured_on = tuple(sorted(devices)) if device and devices != {device} else ()
    device = device or one_device({part.device for part in parts})
    runs = 0
    for part in parts:
        part.nodes["run"] += runs
        part.programs["run"] += runs
        runs = int(part.programs["run"].max()) + 1
    return Measurements(device, pd.concat([p.nodes for p in parts], ignore_index=True),
                        pd.concat([p.programs for p in parts], ignore_index=True),
                        DeviceLimits.common([part.limits for part in parts]), measured_on)
