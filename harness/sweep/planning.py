"""A sweep: models x strategies on a target, one record each, written as produced.

A record's ``identity`` is everything its numbers depend on: the model (name, digest of its
source), the strategy's code (its class's module, its base classes' modules and the helpers
they import; a plug-in's file), the harness code that measures it, and the target's
environment (tool versions; where programs run, the runtime's digest, the machine and the run
settings). A dirty tree is not an identity. A settled record (see :func:`settled`) whose
identity the results directory or the record cache holds is reused (``fresh`` measures all
again); the rest is measured one job per model (:mod:`harness.sweep.job`) in a worker process,
locally or on Ray (:mod:`harness.sweep.execution`), each model through one
:class:`~harness.pipeline.model.ModelPipeline` (exported once, its lowering prefix from the disk
cache) that every strategy finishes a copy of. A model or strategy that fails, crashes its
worker or passes a limit is a ``failed`` record with the reason, and the sweep goes on; an
unexpected error's traceback is kept in ``RESULTS/logs/``, named by the record's ``log``. Only
this process writes records, each as it arrives; what the libraries print while measuring goes
to stderr: stdout carries only results.
"""

import contextlib
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

import models
import strategies
from harness.cache import DiskCache
from harness.errors import TargetUnavailableError, UsageError
from layoutkit import strict_json
from layoutkit.errors import write_error
from harness.results.provenance import code_digest, identity_fields, provenance
from harness.results.store import RecordStore, key
from harness.sweep import job as job_code
from harness.sweep.events import CommandMistake, Recorded, WorkerEvent
from harness.sweep.execution import Execution
from harness.sweep.job import Job
from harness.targets import MeasureContext, get_target
from layoutkit.files import cache_settings

RECORDS = DiskCache("records")


class SilentProgress:
    """The progress interface a sweep reports to; this one shows nothing."""

    def begin(self, total: int) -> None:
        """The sweep is planned (``total`` records) and the results directory is its own."""

    def stage(self, text: str) -> None:
        pass

    def advance(self, record: dict | None = None) -> None:
        pass


def strategies_for(target_name: str, strategy_names: list[str]) -> list[str | None]:
    """The strategies a target records: the requested ones, or none where layout strategies
    do not apply (Arm)."""
    return list(strategy_names) if get_target(target_name).uses_strategies else [None]


def _write_log(path: Path, text: str) -> str:
    """``text`` (a traceback) into ``path``; its absolute path. A full disk fails in one line,
    as a record's own write does."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    except OSError as error:
        raise write_error(f"a traceback to {path}", error, "--out") from None
    return str(path.resolve())


@dataclass
class Sweep:
    """What a sweep did: every record of its plan, those measured now, those reused and those
    skipped before measuring (a target or a strategy this host cannot run)."""

    records: list = field(default_factory=list)
    measured: list = field(default_factory=list)
    reused: list = field(default_factory=list)
    skipped: list = field(default_factory=list)


def settled(record: dict) -> bool:
    """Whether a record stands for its identity: ok, or a failure a new measurement would
    repeat (``repeatable``: an error of the lowering, a strategy or a tool, a crash); not a
    limit, a kill, a skipped target or a run on a device."""
    return bool(record.get("identity")) and (record.get("status") == "ok" or bool(record.get("repeatable")))


def _unchanged(stored: dict | None, record: dict) -> bool:
    """Whether ``stored`` (a record read from the results directory) says all that ``record``
    does but when: a skip the directory holds already, not to be written again."""
    def said(fields: dict) -> dict:
        return {name: value for name, value in fields.items() if name != "timestamp"}

    return stored is not None and said(stored) == said(json.loads(strict_json.dumps(record, default=str)))


def _cache_record(record: dict) -> None:
    """A settled record into the record cache, with the text of its log (a file of one
    results directory) so that a reuse elsewhere gets it too."""
    body = dict(record)
    if record.get("log"):
        with contextlib.suppress(OSError):
            body["log_text"] = Path(record["log"]).read_text(errors="replace")
    RECORDS.write(record["identity"], strict_json.dumps(body, default=str).encode())


def _with_log(record: dict, store: RecordStore) -> dict:
    """A record reused from the record cache, its log (if any) written into ``store``'s directory."""
    log_text = record.pop("log_text", None)
    if log_text is not None:
        record["log"] = _write_log(store.layout.logs / Path(record["log"]).name, log_text)
    return record


def run_sweep(
    model_names: list[str],
    strategy_names: list[str],
    targets: str | list[str],
    store: RecordStore,
    progress=None,
    fresh: bool = False,
    context: MeasureContext | None = None,
    execution: Execution | None = None,
    wait: bool = True,
) -> Sweep:
    """Measure each (model, strategy) on each target (a name, or several), reusing every
    record whose identity a results directory or the record cache already holds (none with
    ``fresh``); the rest is measured one job per model where ``execution`` says (default: a
    worker process per model, as many at once as the machine has cores). The results
    directory is this sweep's to write throughout (waiting for another writer, or with
    ``wait=False`` stopping: see ``RecordStore.writing``), so its lines are one unbroken
    run. The records come in plan order: targets, then models, then strategies."""
    targets = [targets] if isinstance(targets, str) else list(targets)
    plan = [(m, s, t) for t in targets for m in model_names for s in strategies_for(t, strategy_names)]
    progress = progress or SilentProgress()
    context = context or MeasureContext(results_dir=store.directory.resolve())
    sweep = Sweep()
    with store.writing(wait=wait):
        written = store.read()
        progress.begin(len(plan))
        for target in targets:
            _plan_and_measure(model_names, strategy_names, target, store, written, sweep, progress, fresh, context,
                              execution)
    order = {entry: i for i, entry in enumerate(plan)}
    sweep.records.sort(key=lambda r: order[key(r)])
    return sweep


def _plan_and_measure(model_names: list[str], strategy_names: list[str], target_name: str, store: RecordStore,
                      written: list[dict], sweep: Sweep, progress, fresh: bool, context: MeasureContext,
                      execution: Execution | None) -> None:
    """One target's part of a sweep, into ``sweep``; ``written``: the results directory's records before it."""
    target = get_target(target_name)
    chosen = strategies_for(target_name, strategy_names)
    versions = provenance()
    try:
        target.prepare(context)
        unavailable = None
        environment = target.environment(context)
    except TargetUnavailableError as error:
        unavailable, environment = str(error), {}
    # The code that makes a record (not the code that plans or schedules it).
    harness_digest = code_digest(sys.modules[type(target).__module__], job_code)
    strategy_digests = {s: code_digest(strategies.get_strategy(s)) if s else None for s in chosen}
    known = {} if fresh else {r["identity"]: r for r in written if settled(r)}
    stored = {key(r): r for r in written}  # the latest of each (model, strategy, target)
    # Asked once, before any worker starts: a strategy lacking something here (ilp-time, a cost table).
    strategy_unavailable = {s: strategies.unavailable_reason(s, context.costs) for s in chosen if s}

    def emit(record: dict, measured: bool = True) -> None:
        if measured or not _unchanged(stored.get(key(record)), record):
            record = store.append(record)
        else:
            record = stored[key(record)]
        if settled(record):
            _cache_record(record)
        sweep.records.append(record)
        (sweep.measured if measured else sweep.skipped).append(record)
        progress.advance(record=record)

    jobs = []
    for model_name in model_names:
        job = Job(model_name, target_name, [], {}, versions, context, cache_settings(), os.getcwd())
        if unavailable:
            for strategy in chosen:
                emit(job.record(strategy, "skipped", unavailable), measured=False)
            continue
        model_digest = models.source_digest(model_name)
        for strategy in chosen:
            if strategy_unavailable.get(strategy):
                emit(job.record(strategy, "skipped", strategy_unavailable[strategy]), measured=False)
                continue
            identity = identity_fields(model_name, model_digest, strategy, strategy_digests[strategy], target_name,
                                       environment, harness_digest)
            reused = None if fresh else (known.get(identity["identity"])
                                         or RECORDS.get(identity["identity"], json.loads)[0])
            if reused is None or not target.reusable(reused, context):
                job.strategies.append(strategy)
                job.identities[strategy] = identity
                continue
            if reused["identity"] not in known:
                reused = store.append(_with_log(reused, store))
            sweep.records.append(reused)
            sweep.reused.append(reused)
            progress.advance(record=reused)
        if job.strategies:
            jobs.append(job)

    def handle(event: WorkerEvent) -> None:
        if isinstance(event, Recorded):
            if event.trace:
                event.record["log"] = _write_log(store.layout.log(*key(event.record)), event.trace)
            emit(event.record)
        elif isinstance(event, CommandMistake):
            raise UsageError(event.message)
        else:
            progress.stage(event.stage)

    (execution or Execution()).executor().run(jobs, handle)
