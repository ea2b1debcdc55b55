"""A sweep: models x strategies on a target, one record each, written as produced.

A record's ``identity`` is everything its numbers depend on: the model (name, digest of
its source), the strategy's code (its class's module, its base classes' modules and the
helpers they import; a plug-in's file), the harness code that measures it, and the
target's environment (tool versions; where programs run, the runtime's digest, the machine
and the run settings). A dirty tree is not an identity. A record whose identity is already
in the results directory or in the record cache is reused (``fresh`` measures everything
again); everything else is measured. Each model goes through one
:class:`~harness.pipeline.model.ModelPipeline` (exported once, its lowering prefix from the
disk cache); every strategy then finishes its own copy. A model or strategy that fails
becomes a ``failed`` record with the reason, and the sweep goes on; an unexpected error
keeps its traceback in ``RESULTS/logs/``, named by the record's ``log``. Whatever the
libraries print while measuring goes to stderr: stdout carries only results.
"""

import contextlib
import hashlib
import json
import os
import re
import sys
import traceback
from dataclasses import dataclass, field
from datetime import datetime, timezone

import models
import strategies
from harness.cache import DiskCache
from harness.errors import LayoutbenchError, TargetUnavailableError, UsageError
from harness.pipeline.model import ModelPipeline
from harness.results.provenance import code_digest, provenance
from harness.results.store import RecordStore, make_record
from harness.targets import MeasureContext, get_target
from harness.targets.accuracy import wrong_answer

LOG_DIR = "logs"
RECORDS = DiskCache("records")


class SilentProgress:
    """The progress interface a sweep reports to; this one shows nothing."""

    def stage(self, text: str) -> None:
        pass

    def advance(self, steps: int = 1) -> None:
        pass


@contextlib.contextmanager
def output_to_stderr():
    """While active, what Python code and native libraries print to stdout goes to stderr."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def strategies_for(target_name: str, strategy_names: list[str]) -> list[str | None]:
    """The strategies a target records: the requested ones, or none where layout strategies
    do not apply (Arm)."""
    return list(strategy_names) if get_target(target_name).uses_strategies else [None]


def root_cause(error: BaseException) -> BaseException:
    """The error that says what went wrong: the first of ours in the chain of causes (it
    phrases the failure for the user), else the one at the bottom (ExecuTorch's pass
    manager re-raises a pass's error as a generic ``Exception`` caused by the real one)."""
    chain = [error]
    while chain[-1].__cause__ is not None:
        chain.append(chain[-1].__cause__)
    return next((e for e in chain if isinstance(e, LayoutbenchError)), chain[-1])


def _describe(error: BaseException) -> str:
    if isinstance(error, LayoutbenchError):
        return str(error)
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return f"{type(error).__name__}: {lines[0] if lines else 'no message'}"


def _write_log(store: RecordStore, model: str, strategy: str | None, target: str) -> str:
    """The traceback being handled, in a file under the results directory; its path."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{model}--{strategy or 'none'}--{target}") + ".log"
    path = store.directory / LOG_DIR / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(traceback.format_exc())
    return str(path.resolve())


def _identity(model: str, model_digest: str, strategy: str | None, strategy_digest: str | None, target: str,
              environment: dict, harness_digest: str) -> dict:
    """Everything a record's numbers depend on, and its digest (the record's ``identity``)."""
    fields = {
        "model_digest": model_digest,
        "strategy_digest": strategy_digest,
        "harness_digest": harness_digest,
        "environment": environment,
    }
    fields["identity"] = hashlib.sha256(
        json.dumps([model, strategy, target, fields], sort_keys=True, default=str).encode()).hexdigest()[:24]
    return fields


@dataclass
class Sweep:
    """What a sweep did: every record of its plan, those measured now and those reused."""

    records: list = field(default_factory=list)
    measured: list = field(default_factory=list)
    reused: list = field(default_factory=list)


def _reusable(store: RecordStore) -> dict:
    """The ok records of a results directory, by identity."""
    return {r["identity"]: r for r in store.read() if r.get("status") == "ok" and r.get("identity")}


def _cached_record(identity: str) -> dict | None:
    body = RECORDS.read(identity)
    if body is None:
        return None
    try:
        return json.loads(body)
    except ValueError:
        RECORDS.discard(identity, "unreadable")
        return None


def run_sweep(
    model_names: list[str],
    strategy_names: list[str],
    target_name: str,
    store: RecordStore,
    progress=None,
    fresh: bool = False,
    context: MeasureContext | None = None,
) -> Sweep:
    """Measure each (model, strategy) on the target, reusing every record whose identity a
    results directory or the record cache already holds (none with ``fresh``)."""
    target = get_target(target_name)
    chosen = strategies_for(target_name, strategy_names)
    progress = progress or SilentProgress()
    context = context or MeasureContext(results_dir=store.directory)
    versions = provenance()
    sweep = Sweep()
    try:
        target.prepare(context)
        unavailable = None
        environment = target.environment(context)
    except TargetUnavailableError as error:
        unavailable, environment = str(error), {}
    harness_digest = code_digest(sys.modules[type(target).__module__], sys.modules[__name__])
    strategy_digests = {s: code_digest(strategies.get_strategy(s)) if s else None for s in chosen}
    known = {} if fresh else _reusable(store)

    def emit(model, strategy, status, reason=None, **fields):
        record = make_record(model, strategy, target_name, status, reason, **versions, **fields)
        record["timestamp"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
        store.append(record)
        if status == "ok" and record.get("identity"):
            RECORDS.write(record["identity"], json.dumps(record, default=str).encode())
        sweep.records.append(record)
        sweep.measured.append(record)
        progress.advance()

    for model_name in model_names:
        model = ModelPipeline(model_name)
        model_digest = None if unavailable else models.source_digest(model_name)
        for strategy in chosen:
            if unavailable:
                emit(model_name, strategy, "skipped", unavailable)
                continue
            identity = _identity(model_name, model_digest, strategy, strategy_digests[strategy], target_name,
                                 environment, harness_digest)
            reused = None if fresh else known.get(identity["identity"]) or _cached_record(identity["identity"])
            if reused is not None:
                if reused["identity"] not in known:
                    store.append(reused)
                sweep.records.append(reused)
                sweep.reused.append(reused)
                progress.advance()
                continue
            progress.stage(f"{model_name}: {strategy or target_name}")
            fields: dict = dict.fromkeys(target.metrics)  # every record of a target has its keys
            try:
                with output_to_stderr():
                    target.measure(model, strategy, fields, context)
            except Exception as raised:  # one model's failure must not end the sweep
                error = root_cause(raised)
                if isinstance(error, UsageError):
                    raise error from raised
                if isinstance(error, TargetUnavailableError):
                    emit(model_name, strategy, "skipped", str(error), **identity, **model.record_fields(), **fields)
                    continue
                log = {} if isinstance(error, LayoutbenchError) else {
                    "log": _write_log(store, model_name, strategy, target_name)}
                emit(model_name, strategy, "failed", _describe(error), **log, **identity, **model.record_fields(),
                     **fields)
                continue
            wrong = wrong_answer(fields)
            emit(model_name, strategy, "failed" if wrong else "ok", wrong, **identity, **model.record_fields(),
                 **fields)
    return sweep
