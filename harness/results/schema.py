"""The record schema: what every metric is, in one table.

Each :class:`Metric` says its unit, which direction is better, whether it is deterministic (a count or size
that only a code change moves) or measured (a time, a memory peak, an error: noisy, gated by default only
where runs repeat closely enough: a latency the runtime's events measured), its label, its default gate
threshold, and where it is shown (the default terminal table, the report's charts and tables). The long
form, the gate, the table, the report and the asv units all read it: a new metric is one line here plus
the target that measures it. Records carry ``schema_version``; :func:`upgrade` reads earlier versions.
"""

import math
import sys
from dataclasses import dataclass

SCHEMA_VERSION = 2
IDENTITY_KEYS = ("model", "strategy", "target")
STATUSES = ("ok", "skipped", "failed")
# Record fields that describe a record rather than measure it.
CONTEXT_KEYS = (
    *IDENTITY_KEYS, "status", "reason", "repeatable", "log", "schema_version", "input_shapes", "precision", "runtime",
    "run_note", "attribution_error", "predicted_gpu_ms_by_operator", "worst_limit_violation",
    "predicted_interval_level", "predicted_outside_support", "predicted_ratio_low", "predicted_ratio_high",
    "identity", "model_digest", "strategy_digest", "harness_digest", "environment", "latency_source",
    "torch_version", "executorch_version", "timm_version", "layoutbench_commit", "machine", "cpu",
    "python_version", "timestamp",
)

# The values of a record's latency_source: the runtime's own events in its ETDump, or a
# clock outside the runtime (harness.targets.vulkan.local.latency).
ETDUMP, WALL_CLOCK = "etdump", "wall-clock"


@dataclass(frozen=True)
class Metric:
    name: str
    unit: str  # a key of harness.results.table.FORMATS
    label: str
    better: str | None = "lower"  # "lower", "higher", or None where neither is better
    deterministic: bool = True  # False: measured (times, memory peaks, errors), noisy
    gate: str | None = None  # default threshold: absolute ("0") or relative ("5%")
    gated_where: tuple[str, str] | None = None  # (field, value) both records need for the gate to compare them
    priced: bool = False  # computed from a cost table (--costs): comparable only between records of one table
    heading: str | None = None  # in the default terminal table, under this heading
    column: str | None = None  # the report's column title where there is no heading (else the label)
    chart: int = 0  # > 0: charted per target in the report, in this order (time first): each strategy's
    # change relative to the baseline strategy per model, or the values where the target has no baseline
    report: bool = False  # a model x strategy table per target in the report


def _timing(name, label, unit="seconds", **options) -> Metric:
    return Metric(name, unit, label, deterministic=False, **options)


METRICS = {m.name: m for m in (
    # Vulkan layout (target vulkan and vulkan-run)
    Metric("transitions", "count", "Transitions inserted", gate="0", heading="transitions", chart=4, report=True),
    Metric("excess_transitions", "count", "Transitions over the ILP optimum", heading="excess", report=True),
    Metric("transition_bytes", "bytes", "Bytes written by transitions", gate="5%", heading="moved", report=True),
    # Part of transitions and transition_bytes, which the gate already holds.
    Metric("int8_transitions", "count", "Transitions of int8 tensors (of all transitions)"),
    Metric("int8_transition_bytes", "bytes", "Bytes written by int8 transitions"),
    Metric("delegate_memory_bytes", "bytes", "Delegate memory", gate="5%", heading="memory", chart=5, report=True),
    Metric("transition_memory_bytes", "bytes", "Delegate memory that transitions add"),
    Metric("partitions", "count", "Delegated partitions", better=None, heading="parts"),
    Metric("delegate_ops", "count", "Operators in the delegates", better=None),
    Metric("ops_outside_delegate", "count", "Operators left on the CPU", gate="0", heading="cpu ops"),
    Metric("own_clones", "count", "The model's own clones in the delegates", better=None),
    Metric("pte_bytes", "bytes", "Program size (.pte)"),
    _timing("pass_seconds", "Layout pass time", heading="pass", report=True),
    _timing("finish_seconds", "Layout pass to serialized payload"),
    _timing("serialize_seconds", "Serialization to a .pte"),
    _timing("prefix_seconds", "Lowering before the layout pass"),
    _timing("export_seconds", "Model build and export (or its load from the cache)"),
    _timing("prefix_load_seconds", "Loading the lowering prefix from the cache"),
    # the worker that measured a record (every target)
    _timing("worker_peak_rss_bytes", "Peak resident memory of the worker while measuring", unit="bytes"),
    # strategies' own fields (ilp, ilp-bytes, ilp-time, bfs-refined)
    Metric("optimal", "bool", "Proven optimal (ILP)", better="higher", heading="optimal"),
    Metric("objective", "score", "ILP objective"),
    Metric("bound", "score", "ILP lower bound", better=None),
    Metric("variables", "count", "ILP variables", better=None),
    Metric("constraints", "count", "ILP constraints", better=None),
    _timing("solve_seconds", "ILP formulation and solve"),
    Metric("anchors_kept", "count", "Partitions where ilp-time kept its anchor: its optimum saved no more than "
           "the table's spread", better=None),
    Metric("bfs_transitions", "count", "Transitions before refinement"),
    _timing("refine_seconds", "Refinement (bfs-refined)"),
    # running a program (vulkan-run, the TOSA reference model, vgf)
    # Gated at 5 % where both records timed it by the runtime's events (Method::execute less the
    # event tracer's own logging, the fastest of three processes): on an H100 twelve programs
    # moved by at most 3.3 % between four runs (docs/latency.md), so 5 % is past the noise;
    # wall-clock latencies are not compared (one program's ranged 3.94 to 7.26 ms there).
    _timing("latency_ms_median", "Median latency of one inference", unit="ms", heading="latency", chart=3,
            report=True, gate="5%", gated_where=("latency_source", ETDUMP)),
    _timing("latency_ms_p10", "10th percentile of the inferences' latency", unit="ms"),
    _timing("latency_ms_p90", "90th percentile of the inferences' latency", unit="ms"),
    _timing("latency_ms_min", "Fastest inference", unit="ms"),
    _timing("latency_ms_max", "Slowest inference", unit="ms"),
    _timing("load_ms", "Loading the program's method (Method::init: shader pipelines, prepacking)", unit="ms"),
    _timing("copy_inputs_ms", "Copying the inputs into the delegate, per inference (ETVK_COPY_INPUTS)", unit="ms"),
    _timing("graph_execute_ms", "The delegate's graph, per inference (ETVK_COMPUTE_GRAPH_EXECUTE)", unit="ms"),
    _timing("method_execute_ms", "One inference as the runtime timed it, its event tracer included (Method::execute)",
            unit="ms"),
    _timing("event_tracer_ms", "The event tracer's logging of the dispatches' GPU times, per inference (left out "
            "of the latency)", unit="ms"),
    Metric("iterations", "count", "Timed inferences", better=None),
    _timing("setup_seconds", "Set-up before the first inference (VGF)", report=True),
    _timing("peak_rss_bytes", "Peak resident memory of the run", unit="bytes", heading="peak rss"),
    _timing("max_abs_error", "Max abs error vs eager PyTorch", unit="error", heading="max error", report=True),
    Metric("error_tolerance", "error", "Allowed max abs error", better=None, deterministic=False),
    Metric("top1_match", "bool", "Top-1 class agrees with eager PyTorch", better="higher", deterministic=False),
    _timing("gpu_dispatch_ms", "GPU time of one inference's dispatches (ETDump)", unit="ms", heading="gpu",
            report=True),
    _timing("transition_gpu_ms", "GPU time of the transitions' dispatches", unit="ms"),
    _timing("transition_time_share", "Share of GPU dispatch time in transitions", unit="fraction",
            heading="trans. time", report=True),
    _timing("staging_gpu_ms", "GPU time of ET-VK's copies of inputs and outputs", unit="ms"),
    # predicted from a device's cost table (--costs): deterministic for one table and one program
    Metric("predicted_gpu_ms", "ms", "Predicted GPU time of one inference (cost table)", gate="1%",
           heading="pred gpu", chart=1, report=True, priced=True),
    # How far a prediction can be trusted (absent from records of older tables).
    Metric("predicted_measured_share", "fraction", "Share of the predicted time priced from nodes measured on "
           "this model", better=None, column="measured share", priced=True),
    # An interval at a named level (predicted_interval_level), split conformal on held-out models' residuals and
    # widened, for nodes outside the table's support, to their family's worst held out (costmodel.intervals).
    Metric("predicted_gpu_ms_low", "ms", "Low end of the predicted GPU time's interval", better=None,
           column="pred low", priced=True),
    Metric("predicted_gpu_ms_high", "ms", "High end of the predicted GPU time's interval", better=None,
           column="pred high", priced=True),
    # Nodes whose kernel family the table never measured, or measured only at other sizes (costmodel.support);
    # predicted_outside_support names the families and their predicted ms.
    Metric("predicted_outside_support_share", "fraction", "Share of the predicted time in nodes outside the cost "
           "table's support", better=None, column="outside support", priced=True),
    # Where the table states its device's limits (costmodel.device_limits); the worst one named in
    # worst_limit_violation. vulkan-run does not run a program with any.
    Metric("limit_violations", "count", "Tensors beyond the cost table's device limits (image extents, buffer bytes)",
           priced=True),
    # What predicted_gpu_ms predicts: computed from a run's record (frames.with_derived), not recorded.
    _timing("measured_gpu_ms", "Measured GPU time of one inference's operators and transitions", unit="ms",
            column="measured gpu", chart=2),
    _timing("prediction_error", "Predicted / measured GPU time of operators and transitions, less 1",
            unit="fraction", better=None, column="prediction error"),
    # Arm targets
    _timing("lowering_seconds", "Lowering (Arm flows)"),
    Metric("tosa_ops", "count", "TOSA operators", better=None, heading="tosa ops", report=True),
    Metric("transposes", "count", "TRANSPOSEs left in the TOSA graph", gate="0", heading="transposes", chart=6),
    Metric("transpose_bytes", "bytes", "Bytes written by TRANSPOSEs", gate="5%", heading="transp. bytes", report=True),
    Metric("cycles", "cycles", "Ethos-U cycles (Vela estimate)", gate="5%", heading="cycles", chart=7),
    Metric("inferences_per_second", "per_second", "Ethos-U inferences/s (Vela estimate)", better="higher",
           heading="inf/s", report=True),
    Metric("sram_bytes", "bytes", "Ethos-U SRAM", report=True),
    Metric("offchip_bytes", "bytes", "Ethos-U off-chip memory", report=True),
    Metric("transpose_cycle_share", "fraction", "Share of Ethos-U cycles in transposes", heading="transp. cycles",
           report=True),
    Metric("core_clock_hz", "hertz", "Ethos-U core clock", better=None),
)}


def metric(name: str) -> Metric:
    return METRICS[name]


def default_thresholds() -> str:
    """The gate's default: every metric with a default threshold (deterministic ones, and
    latency where the runtime's events measured it)."""
    return ",".join(f"{m.name}={m.gate}" for m in METRICS.values() if m.gate is not None)


# The types of the fields every reader of a record relies on.
_CONTEXT_TYPES = {"model": str, "strategy": (str, type(None)), "target": str, "status": str,
                  "reason": (str, type(None))}


def well_formed(record: dict) -> bool:
    """Whether ``record`` can be read as one: its context fields of their types, a known
    status and a whole-number schema version (none: version 1)."""
    return (all(isinstance(record.get(name), types) for name, types in _CONTEXT_TYPES.items())
            and record.get("status") in STATUSES and type(record.get("schema_version", 1)) is int)


# The units whose values are never negative, each with what such a value is; the others are
# signed (an ILP's objective, a prediction's relative error) or a boolean.
NEVER_NEGATIVE = {"count": "count", "bytes": "size", "cycles": "count", "seconds": "time", "ms": "time",
                  "error": "error", "per_second": "rate", "hertz": "frequency"}


def no_value(value) -> bool:
    """Whether a metric's ``value`` is none: null, or NaN (which records written by other tools may hold)."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def bad_value(name: str, value) -> str | None:
    """Why ``value`` cannot be metric ``name``'s (no value is not a bad one), or None: a metric is a finite number a
    float holds (a boolean only where its unit is one), and a count, a size or a time is never negative."""
    unit = METRICS[name].unit
    if no_value(value) or (isinstance(value, bool) and unit == "bool"):
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"{value!r}, not a number"
    if isinstance(value, int) and abs(value) > sys.float_info.max:
        return f"an integer of {len(str(abs(value)))} digits, beyond a float"
    if math.isinf(value):
        return f"{value!r}, not a finite number"
    if unit in NEVER_NEGATIVE and value < 0:
        return f"{value!r}, negative, which a {NEVER_NEGATIVE[unit]} never is"
    return None


def bad_values(record: dict) -> list[str]:
    """What no reader can use in ``record``, a phrase each: a metric's bad value (see
    :func:`bad_value`), or a schema version newer than this code reads."""
    problems = [f"{name} is {why}" for name in METRICS if (why := bad_value(name, record.get(name)))]
    if record.get("schema_version", 1) > SCHEMA_VERSION:
        problems.append(f"schema_version is {record['schema_version']}, written by a newer layoutbench (this one "
                        f"reads up to {SCHEMA_VERSION}): read it with that version")
    return problems


def metric_columns(columns) -> list[str]:
    """The columns of a record frame that are metrics: the schema's, and any other field a
    plug-in strategy added (everything that is not context)."""
    return [c for c in columns if c in METRICS or c not in CONTEXT_KEYS]


# Schema 1 (before one key per idea across targets) -> 2.
_RENAMED_V1 = {"reference_max_abs_error": "max_abs_error", "reference_top1_match": "top1_match",
               "reference_note": "run_note"}
_SECONDS_TO_MS_V1 = {"reference_seconds": "latency_ms_median", "inference_seconds": "latency_ms_median"}
_V1_BACKEND_STRATEGY = "arm-backend"


def upgrade(record: dict) -> dict:
    """A record of any schema version in the current one (version 1 had no version key)."""
    if record.get("schema_version", 1) >= SCHEMA_VERSION:
        return record
    record = dict(record)
    for old, new in _RENAMED_V1.items():
        if old in record:
            value = record.pop(old)
            record[new] = value if value is not None else record.get(new)
    for old, new in _SECONDS_TO_MS_V1.items():
        if old in record:
            value = record.pop(old)
            if value is not None:
                record[new] = value * 1000
    if record.get("strategy") == _V1_BACKEND_STRATEGY:
        record["strategy"] = None  # the Arm backend's own passes: no pluggable strategy
    record["schema_version"] = SCHEMA_VERSION
    return record
