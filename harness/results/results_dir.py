"""The layout of a results directory, in one place: every file a command keeps there.

::

    RESULTS/records.jsonl                      the records (harness.results.store)
    RESULTS/.writer.lock                       who writes the directory now
    RESULTS/logs/<model>--<strategy>--<target>.log        traceback of an unexpected error
    RESULTS/logs/<model>--<strategy>--<target>.crash.log  where a worker's native code crashed
    RESULTS/programs/<model>/<strategy>.pte    a vulkan-run program, and beside it
               .nodes.json  its node map      .etdump  its first runtime process's ETDump
               .inputs/     its inputs        .2.etdump, .3.etdump ...  the other processes'
               .eager.pt    eager PyTorch's outputs for them    .outputs/  another machine's (import-remote)
    RESULTS/profile-<model>-<strategy>[-vs-<other>].png   profile's chart
    RESULTS/devices/<serial>/                  run --device adb: the device's results directory, and in it
               adb-bundle/  the programs, the runner and run.sh as last pushed there
    RESULTS/costs.json                         calibrate's cost table
    RESULTS/held-out/<model>.json              calibrate --validate's table fitted without the model
    RESULTS/validation.csv                     every program's time as its model's held-out table predicts it
    RESULTS/explorer/<model>/<model>.etrecord  explore's drawing of the model (Model Explorer's ETRecord adapter)
    RESULTS/explorer/<model>/<strategy>[-vs-<other>]/NN-<overlay>.json     its node data, one file per overlay
    RESULTS/report.html, report.md, report_charts/         report's output

``harness/targets/vulkan/remote/remote_runner.py`` is the one other module that knows ``programs/``
(and names the ETDumps of several processes and the outputs, ``etdump_paths``, ``output_paths``):
a script run with Python alone on another machine, it cannot import this module.
"""

import contextlib
import re
from pathlib import Path

from layoutkit.errors import UsageError


def _file_name(text: str) -> str:
    """``text`` as one file name (a plug-in's ``module:Class``, a model's ``timm:name``)."""
    return text.replace(":", ".").replace("/", "_")


class ResultsDir:
    """One results directory's paths; nothing is created here (a writer makes a path's folder)."""

    PROGRAM_SUFFIXES = {"node_map": ".nodes.json", "etdump": ".etdump", "inputs": ".inputs",
                        "eager_outputs": ".eager.pt", "device_outputs": ".outputs"}

    def __init__(self, root: str | Path):
        if not str(root):  # Path("") is the current directory, which no one named
            raise UsageError("an empty path names no results directory; name one (e.g. --out results)")
        self.root = Path(root)
        self.records = self.root / "records.jsonl"
        self.writer_lock = self.root / ".writer.lock"
        self.logs = self.root / "logs"
        self.cost_table = self.root / "costs.json"
        self.adb_bundle = self.root / "adb-bundle"
        self.held_out = self.root / "held-out"
        self.validation = self.root / "validation.csv"
        self.report = self.root / "report.html"

    def log(self, model: str, strategy: str | None, target: str, suffix: str = ".log") -> Path:
        """The log of one (model, strategy, target): ``suffix`` ``.crash.log`` for a crash."""
        name = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{model}--{strategy or 'none'}--{target}")
        return self.logs / (name + suffix)

    def worker_crash_log(self, sweep_pid: int, worker: int) -> Path:
        """Where a running worker's faulthandler writes, until the sweep names it for its record."""
        return self.logs / f".worker-{sweep_pid}-{worker}.crash.log"

    def worker_crash_logs(self, sweep_pid: int | None = None) -> list[Path]:
        """Every worker's crash log not yet named for a record (see :meth:`worker_crash_log`),
        or those of the sweep ``sweep_pid``."""
        return sorted(self.logs.glob(f".worker-{sweep_pid or '*'}-*.crash.log"))

    def program(self, model: str, strategy: str) -> Path:
        """A strategy's program for a model; the files beside it: :meth:`beside`."""
        return self.root / "programs" / model.replace("/", "_") / f"{_file_name(strategy)}.pte"

    @staticmethod
    def beside(program: Path, kind: str) -> Path:
        """The ``kind`` (a key of :attr:`PROGRAM_SUFFIXES`) kept beside ``program``."""
        return Path(program).with_suffix(ResultsDir.PROGRAM_SUFFIXES[kind])

    @staticmethod
    def etdumps(program: Path) -> list[Path]:
        """Every runtime process's ETDump kept beside ``program`` (``<stem>.etdump``,
        ``<stem>.N.etdump``), not another strategy's whose name starts with ``<stem>.``."""
        own = re.compile(rf"{re.escape(program.stem)}(\.\d+)?{re.escape(ResultsDir.PROGRAM_SUFFIXES['etdump'])}")
        return sorted(entry for entry in program.parent.iterdir() if own.fullmatch(entry.name))

    def device(self, serial: str) -> Path:
        """The results directory of the programs run on the device ``serial`` (run --device)."""
        return self.root / "devices" / _file_name(serial)

    def held_out_table(self, model: str) -> Path:
        """calibrate --validate's table fitted without ``model``."""
        return self.held_out / f"{model.replace('/', '_')}.json"

    def explorer(self, model: str) -> Path:
        """Where ``explore`` keeps a model's drawing and, a folder per strategy pair, its overlays."""
        return self.root / "explorer" / _file_name(model)

    def etrecord(self, model: str) -> Path:
        return self.explorer(model) / f"{_file_name(model)}.etrecord"

    def overlays(self, model: str, strategies: list[str]) -> Path:
        return self.explorer(model) / "-vs-".join(_file_name(s) for s in strategies)

    def explored(self) -> list[tuple[Path, Path, list[Path]]]:
        """What ``explore`` left here: per strategy pair of each model, the model's ETRecord,
        the pair's folder and its overlay files."""
        return [(etrecord, folder, sorted(folder.glob("*.json")))
                for etrecord in sorted((self.root / "explorer").glob("*/*.etrecord"))
                for folder in sorted(p for p in etrecord.parent.iterdir() if p.is_dir())]

    def profile_chart(self, model: str, strategies: list[str]) -> Path:
        return self.root / f"profile-{model}-{'-vs-'.join(strategies)}.png".replace(":", ".")


def remove_if_empty(crash_log: Path) -> None:
    """A worker's crash log, gone where nothing was written to it (a worker killed, not crashed)."""
    with contextlib.suppress(OSError):
        if crash_log.stat().st_size == 0:
            crash_log.unlink()
