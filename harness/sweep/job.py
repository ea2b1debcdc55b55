"""The measuring half of a sweep: one model's records, made wherever a worker runs.

A :class:`Job` is one model and the strategies still to measure on one target, with the
identity the sweep planned for each. :func:`run_job` runs it and reports through ``send``
(:mod:`harness.sweep.events`): :class:`BuildingModel` while building what every strategy
shares, :class:`Measuring` before each measurement, then :class:`Recorded`, or
:class:`CommandMistake` for a mistake of the command line.
It runs in a worker process (a local one, or a Ray task), so a native crash ends only the
worker: the sweep learns from the missing record which measurement it was in. A job carries
what the worker needs of its sweep's settings (the context, the cache), not its environment.
"""

import contextlib
import gc
import os
import traceback
from dataclasses import dataclass, field
from datetime import datetime, timezone

from torch._subclasses.fake_tensor import FakeTensorMode

import strategies
from harness.errors import LayoutbenchError, TargetUnavailableError, UnavailableError, UsageError, describe
from harness.pipeline.model import ModelPipeline
from harness.quiet import output_to_stderr
from harness.results.provenance import code_digest
from harness.results.store import make_record
from harness.sweep.events import BuildingModel, CommandMistake, Measuring, Recorded
from harness.targets import MeasureContext, get_target
from harness.targets.accuracy import wrong_answer
from layoutkit.errors import OUT_OF_SPACE_ERRNOS
from layoutkit.files import CacheSettings, cache_settings, install


@dataclass
class Job:
    """One model's measurements on one target."""

    model: str
    target: str
    strategies: list
    identities: dict  # strategy -> the identity fields the sweep planned for its record
    versions: dict  # the tool versions every record carries
    context: MeasureContext = field(default_factory=MeasureContext)
    cache: CacheSettings = field(default_factory=cache_settings)  # where it was made; installed in the worker
    cwd: str | None = None

    def record(self, strategy, status: str, reason: str | None, **fields) -> dict:
        """A record of this job, stamped now."""
        record = make_record(self.model, strategy, self.target, status, reason, **self.versions,
                             **self.identities.get(strategy, {}), **fields)
        record["timestamp"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
        return record


def root_cause(error: BaseException) -> BaseException:
    """The error that says what went wrong: the first of ours in the chain of causes (it
    phrases the failure for the user), else the one at the bottom (ExecuTorch's pass
    manager re-raises a pass's error as a generic ``Exception`` caused by the real one)."""
    chain = [error]
    while chain[-1].__cause__ is not None:
        chain.append(chain[-1].__cause__)
    return next((e for e in chain if isinstance(e, LayoutbenchError)), chain[-1])


def reset_peak_resident_memory() -> bool:
    """Start this process's resident high-water mark (Linux's VmHWM) again from what is
    resident now, so the next :func:`peak_resident_bytes` is one measurement's peak, not the
    process's; False where the kernel does not allow it."""
    try:
        with open("/proc/self/clear_refs", "w") as clear_refs:
            clear_refs.write("5")
        return True
    except OSError:
        return False


def peak_resident_bytes() -> int:
    """This process's resident high-water mark (VmHWM) in bytes."""
    with open("/proc/self/status") as status:
        kibibytes = next(line.split()[1] for line in status if line.startswith("VmHWM:"))
    return int(kibibytes) * 1024


def release_held_memory() -> None:
    """Free what finished work still holds, so that each strategy of a job starts from the
    memory the first one did: torch's fake-tensor dispatch cache (process-wide) keys entries
    by their arguments, among them each strategy's lowered delegates with their payloads (a
    copy of the weights); and exported and lowered graphs are reference cycles that only the
    garbage collector frees."""
    FakeTensorMode.cache_clear()
    gc.collect()


@contextlib.contextmanager
def model_out_of_collections():
    """While active, what exists now (the model's stages: a lowering prefix is a large graph
    of objects) is out of the garbage collector's way, as the fork server's imports are: a
    collection, automatic or between strategies, then traverses only what came after, which
    holds all that a strategy leaves. Given back afterwards, so a process that measures
    several models (no worker process) frees each one's."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _code_mismatch(job: Job, strategy) -> str | None:
    """Why the strategy this worker would run is not the code the sweep planned the record
    for (a plug-in file edited, or another version on a cluster's node, would make a record
    whose identity lies), or None."""
    planned = job.identities.get(strategy, {}).get("strategy_digest")
    here = code_digest(strategies.get_strategy(strategy)) if strategy else None
    if planned == here:
        return None
    return (f"the strategy's code here (digest {here}) is not the code the sweep planned for (digest {planned}); "
            "install the same version wherever workers run")


def _strategy_record(job: Job, target, model: ModelPipeline, strategy) -> Recorded:
    """One strategy's record (with the traceback of an unexpected error); a failure is ``repeatable``
    where the target's failures repeat (see ``Target.failures_repeat``)."""
    fields: dict = dict.fromkeys(target.metrics)  # every record of a target has its keys
    fields["worker_peak_rss_bytes"] = None
    peak_is_this_records = reset_peak_resident_memory()

    def record(status: str, reason: str | None, **extra) -> dict:
        if peak_is_this_records:
            fields["worker_peak_rss_bytes"] = peak_resident_bytes()
        return job.record(strategy, status, reason, **model.record_fields(), **fields, **extra)

    mismatch = _code_mismatch(job, strategy)
    if mismatch:
        return Recorded(record("failed", mismatch, repeatable=False))
    try:
        target.measure(model, strategy, fields, job.context)
    except Exception as raised:  # one model's failure must not end the sweep
        error = root_cause(raised)
        if isinstance(error, UsageError):
            raise error from raised
        if isinstance(error, UnavailableError):  # a tool, a runtime or a cost table this host lacks
            return Recorded(record("skipped", str(error)))
        trace = None if isinstance(error, LayoutbenchError) else traceback.format_exc()
        # A full disk is the host's, not the model's: measured again once there is space.
        repeatable = target.failures_repeat and not (isinstance(error, OSError) and error.errno in OUT_OF_SPACE_ERRNOS)
        return Recorded(record("failed", describe(error), repeatable=repeatable), trace)
    wrong = wrong_answer(fields)
    if wrong:
        return Recorded(record("failed", wrong, repeatable=target.failures_repeat))
    return Recorded(record("ok", None))


def run_job(job: Job, send, wait_turn=None) -> None:
    """Measure every strategy of ``job``, reporting each as described in the module;
    ``wait_turn`` (where given) returns when the worker may build the model and measure:
    until then it only reads from the caches what the model's strategies share."""
    if job.cwd and os.path.isdir(job.cwd):
        os.chdir(job.cwd)
    install(job.cache)
    target = get_target(job.target)
    model = ModelPipeline(job.model)
    with output_to_stderr():
        try:
            if job.context.costs is not None:
                job.context.costs.ready()  # once per worker, not in a strategy's pass time
            target.prepare(job.context)
        except TargetUnavailableError as error:  # this worker's host cannot measure
            for strategy in job.strategies:
                send(Recorded(job.record(strategy, "skipped", str(error))))
            return
        if wait_turn is not None:
            with contextlib.suppress(Exception):  # what did not load is built in the worker's turn
                target.load_cached_model(model)
            wait_turn()
        send(BuildingModel(job.model))
        with contextlib.suppress(Exception):  # a failed stage fails each record, with its reason
            target.prepare_model(model)
        release_held_memory()  # what building the model left
        with model_out_of_collections():
            for strategy in job.strategies:
                send(Measuring(job.model, job.target, strategy))
                try:
                    recorded = _strategy_record(job, target, model, strategy)
                except UsageError as error:
                    send(CommandMistake(str(error)))
                    return
                send(recorded)
                release_held_memory()
