"""A sweep: models x strategies on a target, one record each, written as produced.

Each model is exported (cached on disk) and lowered up to the layout pass once; every
strategy then finishes its own copy. A model or strategy that fails becomes a ``failed``
record with the reason, and the sweep goes on.
"""

import time
from datetime import datetime, timezone

import models
import strategies
from harness import metrics, validator
from harness.errors import LayoutbenchError, UnknownNameError
from harness.export_cache import export_model
from harness.provenance import provenance
from harness.records import RecordStore, identity, make_record
from harness.vulkan_lowering import VulkanLowering

TARGETS = ("vulkan",)


class SilentProgress:
    """The progress interface a sweep reports to; this one shows nothing."""

    def stage(self, text: str) -> None:
        pass

    def advance(self, steps: int = 1) -> None:
        pass


def check_target(target: str) -> str:
    if target not in TARGETS:
        raise UnknownNameError("target", target, list(TARGETS))
    return target


def _describe(error: Exception) -> str:
    if isinstance(error, LayoutbenchError):
        return str(error)
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return f"{type(error).__name__}: {lines[0] if lines else 'no message'}"


def measure_vulkan(lowering: VulkanLowering, strategy_name: str) -> dict:
    """Finish the lowering with one strategy, validate it, serialize it, measure it."""
    strategy_cls = strategies.get_strategy(strategy_name)
    lowered = lowering.lower(strategy_cls)
    validator.validate(lowered)
    start = time.perf_counter()
    pte = lowered.to_pte()
    serialize_seconds = time.perf_counter() - start
    found = metrics.transitions(lowered)
    memory = metrics.delegate_memory(lowered)
    fields = {
        "transitions": len(found),
        "transition_bytes": sum(t.bytes for t in found),
        "delegate_memory_bytes": memory.total_bytes,
        "transition_memory_bytes": memory.transition_bytes,
        "partitions": len(lowered.partitions),
        "delegate_ops": metrics.delegate_op_count(lowered),
        "ops_outside_delegate": len(metrics.ops_outside_delegate(lowered)),
        "pass_seconds": lowered.pass_seconds,
        "finish_seconds": lowered.finish_seconds,
        "serialize_seconds": serialize_seconds,
        "prefix_seconds": lowering.prefix_seconds,
        "pte_bytes": len(pte),
    }
    fields.update(strategies.summarize(strategy_cls, [p.layout_pass for p in lowered.partitions]))
    return fields


def run_sweep(
    model_names: list[str],
    strategy_names: list[str],
    target: str,
    store: RecordStore,
    progress=None,
    fresh: bool = False,
) -> list[dict]:
    """Run what is not yet recorded; returns the records of this plan (old and new)."""
    check_target(target)
    progress = progress or SilentProgress()
    versions = provenance()
    done = set() if fresh else store.completed()
    produced = []

    def emit(model, strategy, status, reason=None, **fields):
        record = make_record(model, strategy, target, status, reason, **versions, **fields)
        record["timestamp"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
        store.append(record)
        produced.append(record)
        progress.advance()

    for model in model_names:
        pending = [
            s for s in strategy_names
            if identity({"model": model, "strategy": s, "target": target, **versions}) not in done
        ]
        progress.advance(len(strategy_names) - len(pending))
        if not pending:
            continue
        progress.stage(f"{model}: export")
        try:
            start = time.perf_counter()
            spec = models.create(model)
            exported = export_model(spec)
            export_seconds = time.perf_counter() - start
            progress.stage(f"{model}: lower to the layout pass")
            lowering = VulkanLowering.from_exported(exported)
        except Exception as error:  # one model's failure must not end the sweep
            for strategy in pending:
                emit(model, strategy, "failed", _describe(error))
            continue
        shared = {"export_seconds": export_seconds, "input_shapes": spec.input_shapes}
        for strategy in pending:
            progress.stage(f"{model}: {strategy}")
            try:
                fields = measure_vulkan(lowering, strategy)
            except Exception as error:
                emit(model, strategy, "failed", _describe(error), **shared)
                continue
            emit(model, strategy, "ok", **shared, **fields)
    return produced
