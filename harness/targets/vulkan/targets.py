"""The Vulkan (ET-VK) targets: ``vulkan`` (the lowering: transitions, memory, partitions)
and ``vulkan-run`` (the same, then the program run on an ET-VK runtime)."""

import json
import tempfile
import time
from pathlib import Path

from executorch.exir._serialize._cord import Cord

from costmodel.table import CostTable
from harness.errors import LimitsExceededError, TargetUnavailableError
from harness.results.provenance import file_digest
from harness.results.results_dir import ResultsDir
from harness.targets.base import MeasureContext, Target, register_target
from harness.targets.edge_programs import cpu_ops
from harness.targets.vulkan.compile import metrics, validator
from harness.targets.vulkan.compile.lowering import LoweredProgram, VulkanLowering
from harness.targets.vulkan.compile.prefix import LOWERING_PREFIX, vulkan_lowering
from harness.targets.vulkan.local.dispatches import node_map, prediction_error, read_node_map
from harness.targets.vulkan.local.latency import ETDUMP
from harness.targets.vulkan.local.runners import (
    NO_RUNTIME_REASON, ExecutorRunner, find_runtime, remove_program, run_program)
from harness.targets.vulkan.remote.device import vulkan_device, vulkan_limits
import strategies


def lower_and_count(lowering: VulkanLowering, strategy_name: str, fields: dict,
                    table: CostTable | None) -> tuple[LoweredProgram, Cord]:
    """Finish the lowering with one strategy, validate and serialize it, and count what it made
    into ``fields``, with its predicted GPU time and broken device limits under ``table`` (where
    there is one); returns the lowered program and its .pte (not joined into one buffer:
    ``pte_bytes`` needs only its length)."""
    strategy_cls = strategies.get_strategy(strategy_name)
    lowered = lowering.lower(strategy_cls, table)
    validator.validate(lowered)
    start = time.perf_counter()
    pte = lowered.to_pte()
    serialize_seconds = time.perf_counter() - start
    found = metrics.transitions(lowered)
    int8_found = [t for t in found if t.quantized]
    memory = metrics.delegate_memory(lowered)
    fields.update({
        "precision": metrics.precision(lowering),
        "transitions": len(found),
        "transition_bytes": sum(t.bytes for t in found),
        "int8_transitions": len(int8_found),
        "int8_transition_bytes": sum(t.bytes for t in int8_found),
        "delegate_memory_bytes": memory.total_bytes,
        "transition_memory_bytes": memory.transition_bytes,
        "partitions": len(lowered.partitions),
        "delegate_ops": metrics.delegate_op_count(lowered),
        "ops_outside_delegate": len(cpu_ops(lowering.edge_manager)),
        "pass_seconds": lowered.pass_seconds,
        "finish_seconds": lowered.finish_seconds,
        "serialize_seconds": serialize_seconds,
        "prefix_seconds": lowering.prefix_seconds,
        "pte_bytes": len(pte),
        "own_clones": metrics.own_clone_count(lowered),
    })
    fields.update(strategies.summarize(strategy_cls, [p.layout_pass for p in lowered.partitions]))
    if table is not None:
        fields.update(metrics.predicted_gpu_time(lowered, table))
    if table is not None and table.limits is not None:
        fields.update(metrics.limit_violations(lowered, table.limits))
    return lowered, pte


def write_program(path: Path, lowered: LoweredProgram, pte: Cord, inputs: tuple) -> Path:
    """The .pte at ``path``, its node map (``.nodes.json``) and its inputs as a runner reads
    them (``.inputs/``, for ``remote_runner.py``); what an earlier program left beside it (ETDumps,
    eager's outputs, another machine's) goes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_program(path)
    with open(path, "wb") as program:
        pte.write_to_file(program)
    ResultsDir.beside(path, "node_map").write_text(json.dumps(node_map(lowered)))
    ExecutorRunner.write_inputs(list(inputs), ResultsDir.beside(path, "inputs"))
    return path


@register_target("vulkan")
class Vulkan(Target):
    """The ET-VK lowering with the strategy as its layout pass."""

    tools = ("torch", "executorch", "timm", "highspy")

    metrics = ("transitions", "transition_bytes", "int8_transitions", "int8_transition_bytes", "delegate_memory_bytes",
               "transition_memory_bytes", "partitions", "delegate_ops", "ops_outside_delegate", "own_clones",
               "pte_bytes", "pass_seconds", "finish_seconds", "serialize_seconds", "prefix_seconds", "optimal",
               "predicted_gpu_ms", "predicted_measured_share", "predicted_gpu_ms_low", "predicted_gpu_ms_high",
               "predicted_outside_support_share", "limit_violations")

    def environment(self, context: MeasureContext) -> dict:
        """The cost table too, where the context has one: it prices ``predicted_gpu_ms`` and
        decides ``ilp-time``."""
        environment = super().environment(context)
        if context.costs is not None:
            environment["gpu_costs"] = context.costs.name
        return environment

    def load_cached_model(self, model) -> None:
        model.load_cached(LOWERING_PREFIX)

    def prepare_model(self, model) -> None:
        vulkan_lowering(model)

    def measure(self, model, strategy, fields: dict, context: MeasureContext) -> None:
        lower_and_count(vulkan_lowering(model), strategy, fields, context.costs)


@register_target("vulkan-run")
class VulkanRun(Vulkan):
    """The lowering, then its program run on an ET-VK runtime and compared with eager PyTorch."""

    metrics = (*Vulkan.metrics, "latency_ms_median", "latency_ms_p10", "latency_ms_p90", "latency_ms_min",
               "latency_ms_max", "load_ms", "copy_inputs_ms", "graph_execute_ms", "method_execute_ms",
               "event_tracer_ms", "iterations",
               "peak_rss_bytes", "max_abs_error", "error_tolerance", "gpu_dispatch_ms", "transition_gpu_ms",
               "transition_time_share", "staging_gpu_ms", "prediction_error")
    runs_programs = True

    def prepare(self, context: MeasureContext) -> None:
        self.runtime = find_runtime(context.et_runner, context.host.et_runner)
        if self.runtime is None:
            raise TargetUnavailableError(NO_RUNTIME_REASON)

    def environment(self, context: MeasureContext) -> dict:
        """The runtime too (an executor_runner by the digest of its binary) and the Vulkan
        device it runs on, with its limits: a record measured on another GPU is another record."""
        path = getattr(self.runtime, "path", None)
        runtime = f"{self.runtime.name}:{file_digest(path)}" if path else self.runtime.name
        index = context.host.vulkan_device_index
        return {**super().environment(context), "runtime": runtime, "vulkan_device": vulkan_device(index),
                "vulkan_limits": vulkan_limits(index)}

    def reusable(self, record: dict, context: MeasureContext) -> bool:
        """Only where its program, node map, eager's outputs and (if it had one) ETDump are in this
        results directory: profile and costs read them, its latency came from the ETDump, and a
        device that runs the program elsewhere is held to eager's outputs."""
        path = ResultsDir(context.results_dir).program(record["model"], record["strategy"])
        kept = [path, ResultsDir.beside(path, "node_map"), ResultsDir.beside(path, "eager_outputs")]
        if record.get("latency_source") == ETDUMP:
            kept.append(ResultsDir.beside(path, "etdump"))
        return all(p.exists() for p in kept)

    def measure(self, model, strategy, fields: dict, context: MeasureContext) -> None:
        lowered, pte = lower_and_count(vulkan_lowering(model), strategy, fields, context.costs)
        exported = model.exported
        path = ResultsDir(context.results_dir).program(model.name, strategy)
        if fields.get("limit_violations"):
            remove_program(path)  # an earlier one of this name is not left for remote_runner.py to run
            raise LimitsExceededError(f"not run: {fields['limit_violations']} tensors break the limits of "
                                      f"{context.costs.device} (the cost table's device), the worst "
                                      f"{fields['worst_limit_violation']}")
        path = write_program(path, lowered, pte, exported.example_inputs[0])
        with tempfile.TemporaryDirectory() as workdir:
            # exported.module() of an .int8 model is the quantized module: the reference an
            # int8 program is held to.
            fields.update(run_program(self.runtime, path, exported.module(), exported.example_inputs[0],
                                      context.run_settings, Path(workdir), read_node_map(path),
                                      fields["precision"]))
        fields["prediction_error"] = prediction_error(fields)
