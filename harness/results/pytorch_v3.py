"""A results directory's records in the PyTorch OSS benchmark database's "v3" shape, which ExecuTorch's
benchmark jobs upload through pytorch/test-infra's ``upload-benchmark-results`` action into its
``oss_ci_benchmark_v3`` table: one v3 record per model, strategy and metric of :data:`V3_METRICS` that an
ok record holds. The table's maps are ``Map(String, String)``: every ``extra_info`` value is a string. The
run's own columns (timestamp, repository, commit, workflow and job) are the action's ``--metadata``.
"""

import json
from pathlib import Path

from harness.results.schema import METRICS, no_value
from harness.results.store import RecordStore
from layoutkit.errors import UsageError, write_error
from layoutkit.files import write_whole

BENCHMARK_NAME = "layoutbench"
# The metrics the dashboards get: what a strategy changes in the program, and what it costs on a device.
V3_METRICS = ("transitions", "transition_bytes", "delegate_memory_bytes", "latency_ms_median", "gpu_dispatch_ms",
              "predicted_gpu_ms")


def _strings(fields: dict) -> dict[str, str]:
    """A v3 ``extra_info``: the fields that have a value, each as a string."""
    return {name: str(value) for name, value in fields.items() if value is not None}


def v3_records(record: dict) -> list[dict]:
    """One of our records as v3 records, one per metric of :data:`V3_METRICS` it holds."""
    environment = record.get("environment") or {}
    benchmark = {"name": BENCHMARK_NAME, "mode": "inference", "dtype": record.get("precision") or "float32",
                 "extra_info": _strings({name: record.get(name) for name in (
                     "strategy", "strategy_digest", "harness_digest", "layoutbench_commit", "executorch_version")})}
    model = {"name": record["model"], "type": "OSS model", "backend": record["target"], "origins": [BENCHMARK_NAME],
             "extra_info": _strings({"model_digest": record.get("model_digest")})}
    runner = {"name": record.get("machine") or "", "type": record["target"], "cpu_info": record.get("cpu") or "",
              "gpu_info": environment.get("vulkan_device") or "", "extra_info": {}}
    return [{"benchmark": benchmark, "model": model, "runners": [runner], "metric": {
        "name": name, "benchmark_values": [float(record[name])], "target_value": 0.0,
        "extra_info": _strings({"unit": METRICS[name].unit, "label": METRICS[name].label,
                                "cost_table": environment.get("gpu_costs") if METRICS[name].priced else None})}}
            for name in V3_METRICS if not no_value(record.get(name))]


def write_v3(results: str | Path, out: str | Path) -> int:
    """The latest ok record of each (model, strategy, target) in ``results`` as a JSON list of
    v3 records in ``out`` (a ``.json`` file: the upload action reads no other); how many."""
    out = Path(out)
    if out.suffix != ".json":
        raise UsageError(f"--v3 {out}: name a .json file (the upload action reads only those)")
    records = RecordStore(results).latest(status="ok")
    exported = [v3 for record in records for v3 in v3_records(record)]
    if not exported:
        raise UsageError(f"no ok record in '{results}' holds any of {', '.join(V3_METRICS)}; run layoutbench run "
                         f"--out {results} first")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        write_whole(out, (json.dumps(exported, indent=1) + "\n").encode())
    except OSError as error:
        raise write_error(f"the v3 records {out}", error, "--v3") from None
    return len(exported)
