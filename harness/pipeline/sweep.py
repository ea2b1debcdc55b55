"""A sweep: models x strategies on a target, one record each, written as produced.

Each model goes through one :class:`~harness.pipeline.model.ModelPipeline` (exported once,
lowered to the layout pass once); every strategy then finishes its own copy. A model or
strategy that fails becomes a ``failed`` record with the reason, and the sweep goes on; an
unexpected error keeps its traceback in ``RESULTS/logs/``, named by the record's ``log``.
Whatever the libraries print while measuring goes to stderr: stdout carries only results.
"""

import contextlib
import os
import re
import sys
import traceback
from datetime import datetime, timezone

from harness.errors import LayoutbenchError, TargetUnavailableError, UsageError
from harness.pipeline.model import ModelPipeline
from harness.results.provenance import provenance
from harness.results.store import RecordStore, identity, make_record
from harness.targets import MeasureContext, get_target
from harness.targets.accuracy import wrong_answer

LOG_DIR = "logs"


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
    """The error at the bottom of a chain: ExecuTorch's pass manager re-raises a pass's
    error as a generic ``Exception`` whose cause is the real one."""
    while error.__cause__ is not None:
        error = error.__cause__
    return error


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


def run_sweep(
    model_names: list[str],
    strategy_names: list[str],
    target_name: str,
    store: RecordStore,
    progress=None,
    fresh: bool = False,
    context: MeasureContext | None = None,
) -> list[dict]:
    """Run what is not yet recorded; returns the records this call produced."""
    target = get_target(target_name)
    chosen = strategies_for(target_name, strategy_names)
    progress = progress or SilentProgress()
    context = context or MeasureContext(results_dir=store.directory)
    versions = provenance()
    done = set() if fresh else store.completed()
    produced = []

    def emit(model, strategy, status, reason=None, **fields):
        record = make_record(model, strategy, target_name, status, reason, **versions, **fields)
        record["timestamp"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
        store.append(record)
        produced.append(record)
        progress.advance()

    plan = [(m, [s for s in chosen if identity({"model": m, "strategy": s, "target": target_name, **versions})
                 not in done]) for m in model_names]
    progress.advance(sum(len(chosen) - len(pending) for _, pending in plan))
    if not any(pending for _, pending in plan):
        return produced
    try:
        target.prepare(context)
        unavailable = None
    except TargetUnavailableError as error:
        unavailable = str(error)

    for model_name, pending in plan:
        model = ModelPipeline(model_name)
        for strategy in pending:
            if unavailable:
                emit(model_name, strategy, "skipped", unavailable)
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
                    emit(model_name, strategy, "skipped", str(error), **model.record_fields(), **fields)
                    continue
                log = {} if isinstance(error, LayoutbenchError) else {
                    "log": _write_log(store, model_name, strategy, target_name)}
                emit(model_name, strategy, "failed", _describe(error), **log, **model.record_fields(), **fields)
                continue
            wrong = wrong_answer(fields)
            emit(model_name, strategy, "failed" if wrong else "ok", wrong, **model.record_fields(), **fields)
    return produced
