"""A sweep: models x strategies on a target, one record each, written as produced.

Each model is exported (cached on disk) and lowered up to the layout pass once; every
strategy then finishes its own copy. A model or strategy that fails becomes a ``failed``
record with the reason, and the sweep goes on. Arm targets have no pluggable layout
pass: one record per model, strategy ``arm-backend`` (``harness/arm.py``).
"""

import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import models
import strategies
from harness import metrics, validator
from harness.arm import ARM_STRATEGY, ARM_TARGETS, measure_arm
from harness.errors import LayoutbenchError, TargetUnavailableError, UnknownNameError
from harness.export_cache import export_model
from harness.provenance import provenance
from harness.records import RecordStore, identity, make_record
from harness.runners import NO_RUNTIME_REASON, RunSettings, find_runtime, measure_run
from harness.vulkan_lowering import VulkanLowering

TARGETS = ("vulkan", "vulkan-run", *ARM_TARGETS)


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


def strategies_for(target: str, strategy_names: list[str]) -> list[str]:
    """The strategies a target records: the requested ones on Vulkan, the backend's own on Arm."""
    return [ARM_STRATEGY] if target in ARM_TARGETS else strategy_names


def _describe(error: Exception) -> str:
    if isinstance(error, LayoutbenchError):
        return str(error)
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return f"{type(error).__name__}: {lines[0] if lines else 'no message'}"


def measure_vulkan(lowering: VulkanLowering, strategy_name: str) -> tuple[bytes, dict]:
    """Finish the lowering with one strategy, validate it, serialize it, measure it;
    returns the program and its record fields."""
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
        "own_clones": metrics.own_clone_count(lowered),
    }
    fields.update(strategies.summarize(strategy_cls, [p.layout_pass for p in lowered.partitions]))
    return pte, fields


@dataclass
class RunOptions:
    """How ``vulkan-run`` runs programs: which runtime, how many inferences."""

    et_runner: str | None = None
    settings: RunSettings = field(default_factory=RunSettings)


class WrongAnswer(LayoutbenchError):
    """The program ran but its outputs differ from eager PyTorch's."""


def wrong_answer(error: float | None, limit: float | None) -> str | None:
    """The reason a run's outputs are rejected, or None when they are within tolerance."""
    if error is None or error <= limit:
        return None
    return f"outputs differ from eager PyTorch: max abs error {error:.3g} > tolerance {limit:.3g}"


def run_program(pte: bytes, model: str, strategy: str, exported, runtime, options: RunOptions,
                out_dir: Path, own_clones: bool) -> dict:
    """Write the .pte under ``out_dir/programs`` and run it; the run's record fields."""
    path = out_dir / "programs" / model / f"{strategy.replace(':', '.')}.pte"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pte)
    with tempfile.TemporaryDirectory() as workdir:
        return measure_run(runtime, path, exported.module(), exported.example_inputs[0],
                           options.settings, Path(workdir), own_clones)


def run_sweep(
    model_names: list[str],
    strategy_names: list[str],
    target: str,
    store: RecordStore,
    progress=None,
    fresh: bool = False,
    run_options: RunOptions | None = None,
) -> list[dict]:
    """Run what is not yet recorded; returns the records of this plan (old and new)."""
    check_target(target)
    strategy_names = strategies_for(target, strategy_names)
    progress = progress or SilentProgress()
    run_options = run_options or RunOptions()
    runtime = find_runtime(run_options.et_runner) if target == "vulkan-run" else None
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
        if target == "vulkan-run" and runtime is None:
            for strategy in pending:
                emit(model, strategy, "skipped", NO_RUNTIME_REASON)
            continue
        progress.stage(f"{model}: export")
        try:
            start = time.perf_counter()
            spec = models.create(model)
            exported = export_model(spec)
            export_seconds = time.perf_counter() - start
            shared = {"export_seconds": export_seconds, "input_shapes": spec.input_shapes}
            if target in ARM_TARGETS:
                progress.stage(f"{model}: {target}")
                fields = measure_arm(target, exported)
                error = fields.get("reference_max_abs_error", fields.get("max_abs_error"))
                wrong = wrong_answer(error, fields.get("error_tolerance"))
                emit(model, ARM_STRATEGY, "failed" if wrong else "ok", wrong, **shared, **fields)
                continue
            progress.stage(f"{model}: lower to the layout pass")
            lowering = VulkanLowering.from_exported(exported)
        except TargetUnavailableError as error:
            for strategy in pending:
                emit(model, strategy, "skipped", str(error))
            continue
        except Exception as error:  # one model's failure must not end the sweep
            for strategy in pending:
                emit(model, strategy, "failed", _describe(error))
            continue
        for strategy in pending:
            progress.stage(f"{model}: {strategy}")
            fields = {}
            try:
                pte, fields = measure_vulkan(lowering, strategy)
                if runtime is not None:
                    progress.stage(f"{model}: {strategy} on {runtime.name}")
                    fields.update(run_program(pte, model, strategy, exported, runtime, run_options,
                                              store.directory, fields["own_clones"] > 0))
                    wrong = wrong_answer(fields["max_abs_error"], fields["error_tolerance"])
                    if wrong:
                        raise WrongAnswer(wrong)
            except Exception as error:
                emit(model, strategy, "failed", _describe(error), **shared, **fields)
                continue
            emit(model, strategy, "ok", **shared, **fields)
    return produced
