"""What the asv suites share: the models they run over, how programs are run, the cost table
they price with, and :class:`RecordedSuite`, whose ``track_`` benchmarks read a record's metric
in the schema's unit.

Models: the quick zoo unless ``LAYOUTBENCH_BENCH_ZOO`` names another (``full`` for a release
comparison; about 15 minutes to lower) or ``LAYOUTBENCH_BENCH_MODELS`` lists them
(comma-separated, any name ``layoutbench list models`` accepts, user factories and ``.pt2``
programs included).

Runs: one runtime process per program, one warm-up and three timed inferences
(:data:`BENCH_RUN`); ``LAYOUTBENCH_BENCH_RUN`` sets them otherwise, e.g.
``processes=3,iterations=10`` (what ``layoutbench run`` does) for a latency history on a GPU.
asv tells a ``setup_cache`` nothing of ``--quick``, so these are the suite's own.

Costs: ``LAYOUTBENCH_COSTS``, else :data:`DEFAULT_COSTS`, so that CI judges time with no GPU;
:func:`suite_costs` is the one place a suite reads which (and hands it on).
"""

import dataclasses
import os
from pathlib import Path

from asv_runner.benchmarks.mark import SkipNotImplemented

from costmodel.table import COSTS_ENV, CostTable, load
from harness.pipeline.model import pipeline
from harness.results.schema import ETDUMP, metric
from harness.results.store import RecordStore
from harness.sweep.planning import run_sweep
from harness.targets import HostSettings, MeasureContext, RunSettings
from harness.targets.vulkan.compile.prefix import vulkan_lowering
from layoutkit.files import cache_root
import models

DEFAULT_COSTS = Path(__file__).resolve().parent.parent / "docs" / "cost-table" / "h100.json"

BENCH_ZOO = os.environ.get("LAYOUTBENCH_BENCH_ZOO", "quick")
_LISTED = os.environ.get("LAYOUTBENCH_BENCH_MODELS")
BENCH_MODELS = models.resolve_models(_LISTED) if _LISTED else models.resolve_models(zoo=BENCH_ZOO)
BENCH_RUN_ENV = "LAYOUTBENCH_BENCH_RUN"
# One runtime process per program and three timed inferences: on lavapipe (a CPU) one of the
# quick zoo's inferences takes up to 20 s (docs/regressions.md), and a commit may run every
# model x strategy.
PER_COMMIT_RUN = {"processes": 1, "iterations": 3}


def run_settings(text: str) -> RunSettings:
    """``name=value,...`` over :class:`RunSettings`' fields (``processes=3,iterations=10``);
    the fields it does not name keep :data:`PER_COMMIT_RUN`'s values, else RunSettings'."""
    known = {field.name for field in dataclasses.fields(RunSettings)}
    settings = dict(PER_COMMIT_RUN)
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, _, value = item.partition("=")
        if name not in known or not value.isdigit() or (int(value) == 0 and name != "warmup"):
            raise ValueError(f"{BENCH_RUN_ENV}: {item!r} is not one of {', '.join(sorted(known))} set to a "
                             "whole number above 0 (warmup may be 0)")
        settings[name] = int(value)
    return RunSettings(**settings)


BENCH_RUN = run_settings(os.environ.get(BENCH_RUN_ENV, ""))


def warm_caches(model_names: list[str]) -> list[str]:
    """Export and lower every model to the layout pass once (asv ``setup_cache``), so each
    benchmark process only loads its prefix from the disk cache. Returns the names: asv passes
    on no ``setup_cache`` that returns None, which would change the benchmarks' signatures."""
    for name in model_names:
        vulkan_lowering(pipeline(name))
    return list(model_names)


def track(name: str, event_timed: bool = False):
    """A ``track_`` benchmark: the metric ``name`` of the record ``setup`` selected, in the
    schema's unit; ``event_timed``: skipped where the runtime's events did not time the record."""

    def benchmark(self, records, *params):
        if event_timed and self.record["latency_source"] != ETDUMP:
            raise SkipNotImplemented("the runtime wrote no ETDump: build executor_runner with "
                                     "-DEXECUTORCH_ENABLE_EVENT_TRACER=ON")
        return self.record[name]

    benchmark.unit = metric(name).unit
    benchmark.__doc__ = metric(name).label
    return benchmark


class RecordedSuite:
    """Base of suites whose ``track_`` benchmarks read the record ``setup_cache`` made for
    their parameters; a record that is not ok skips them with its reason.

    Each suite's ``setup_cache`` returns :meth:`sweep` (asv keys a setup cache by the file and
    line defining it, so an inherited one would be shared between suites): its models (the
    first parameter) x its ``strategy`` parameter (if any) on its ``target`` parameter, else
    the class's ``target``, keyed by the parameter values. Records an earlier commit with the
    same code made are reused, so a commit pays only for what it changed: the results
    directory stays in the cache (``asv-results/<suite>``), since a vulkan-run record is
    reused only beside its program and ETDump."""

    timeout = 3600
    target = "vulkan"

    def _param(self, name: str, default: list) -> list:
        return list(self.params[self.param_names.index(name)]) if name in self.param_names else default

    def sweep(self) -> dict:
        model_names = list(self.params[0])
        strategy_names = self._param("strategy", [])
        store = RecordStore(cache_root() / "asv-results" / type(self).__name__)
        context = MeasureContext(results_dir=store.directory.resolve(), run_settings=BENCH_RUN, costs=suite_costs(),
                                 host=HostSettings.from_environment(os.environ))
        records = [record for target in self._param("target", [self.target])
                   for record in run_sweep(model_names, strategy_names, target, store, context=context).records]
        return {tuple(record[name] for name in self.param_names): record for record in records}

    def setup(self, records, *params):
        self.record = records[params]
        if self.record["status"] != "ok":
            raise NotImplementedError(self.record["reason"])


def suite_costs() -> CostTable:
    """The cost table the suites price with: ``LAYOUTBENCH_COSTS``, else :data:`DEFAULT_COSTS`."""
    return load(os.environ.get(COSTS_ENV) or DEFAULT_COSTS)
