"""`report --v3`: a results directory in the PyTorch OSS benchmark "v3" shape, held against
the columns of the table it lands in (pytorch/test-infra's
clickhouse_db_schema/benchmark.oss_ci_benchmark_v3/schema.sql, written out below as data:
field names and ClickHouse types), one record per model, strategy and metric."""

import json
import math

import pytest

from harness import cli
from harness.results.pytorch_v3 import V3_METRICS
from harness.results.store import RecordStore, make_record

MAP = "Map(String, String)"
RUNNER = {"name": "String", "type": "String", "cpu_info": "String", "cpu_count": "UInt32", "mem_info": "String",
          "avail_mem_in_gb": "UInt32", "gpu_info": "String", "gpu_count": "UInt32", "gpu_mem_info": "String",
          "avail_gpu_mem_in_gb": "UInt32", "extra_info": MAP}
# The table's columns; those the upload action's --metadata fills (timestamp ... job_id) are allowed, not needed.
V3_COLUMNS = {
    "timestamp": "UInt64", "schema_version": "String", "name": "String", "repo": "String", "head_branch": "String",
    "head_sha": "String", "workflow_id": "UInt64", "run_attempt": "UInt32", "job_id": "UInt64",
    "servicelab_experiment_id": "UInt64", "servicelab_trial_id": "UInt64",
    "runners": [RUNNER],
    "benchmark": {"name": "String", "mode": "String", "dtype": "String", "extra_info": MAP},
    "model": {"name": "String", "type": "String", "backend": "String", "origins": "Array(String)", "extra_info": MAP},
    "inputs": {"*": {"dtype": "String", "extra_info": MAP}},
    "dependencies": {"*": {"repo": "String", "branch": "String", "sha": "String", "version": "String",
                           "extra_info": MAP}},
    "metric": {"name": "String", "benchmark_values": "Array(Float32)", "target_value": "Float32", "extra_info": MAP},
}
FLOAT32_MAX = 3.4028235e38


def _type_errors(value, column, where: str) -> list[str]:
    """Where ``value`` is not of ``column``'s ClickHouse type (a dict: a named tuple, or with
    "*" a map of such tuples; a one-item list: an array of it)."""
    if isinstance(column, list):
        if not isinstance(value, list):
            return [f"{where} is not an array"]
        return [error for index, item in enumerate(value) for error in _type_errors(item, column[0], f"{where}[{index}]")]
    if isinstance(column, dict):
        if not isinstance(value, dict):
            return [f"{where} is not an object"]
        if "*" in column:
            return [error for key, item in value.items() for error in _type_errors(item, column["*"], f"{where}.{key}")]
        unknown = [f"{where}.{key} is no column of the table" for key in value if key not in column]
        return unknown + [error for key, item in value.items() if key in column
                          for error in _type_errors(item, column[key], f"{where}.{key}")]
    if column.startswith("Array("):
        return _type_errors(value, [column[len("Array("):-1]], where)
    fits = {
        "String": lambda: isinstance(value, str),
        MAP: lambda: isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()),
        "UInt32": lambda: type(value) is int and 0 <= value < 2**32,
        "UInt64": lambda: type(value) is int and 0 <= value < 2**64,
        "Float32": lambda: type(value) in (int, float) and math.isfinite(value) and abs(value) <= FLOAT32_MAX,
    }[column]
    return [] if fits() else [f"{where} = {value!r} is not {column}"]


def _records(directory) -> None:
    store = RecordStore(directory)
    provenance = {"strategy_digest": "2e1ea0e80efef7ab", "harness_digest": "64d5953fc6b17c4c", "machine": "vm",
                  "cpu": "x86_64", "model_digest": "697284e9cc937fcc", "precision": "float16"}
    store.append(make_record("m1", "ilp-time", "vulkan-run", "ok", transitions=99, **provenance))  # replaced below
    store.append(make_record("m1", "ilp-time", "vulkan-run", "ok", transitions=3, transition_bytes=1 << 40,
                             delegate_memory_bytes=4 << 20, latency_ms_median=2.5, gpu_dispatch_ms=1.9,
                             predicted_gpu_ms=1.7, max_abs_error=0.01, **provenance,
                             environment={"vulkan_device": "llvmpipe (LLVM 15.0.6, 256 bits)",
                                          "gpu_costs": "NVIDIA H100 80GB HBM3:4f2edbea7a08f96e"}))
    store.append(make_record("m1", "bfs-downstream", "vulkan", "ok", transitions=5, transition_bytes=None,
                             **provenance))
    store.append(make_record("m2", "ilp-time", "vulkan-run", "failed", "no shader conv2d_dw_x", **provenance))
    with store.path.open("a") as records:  # a NaN, as Python's json writes one, from a tool other than layoutbench
        records.write(json.dumps(make_record("m3", "ilp-time", "vulkan", "ok", transitions=1,
                                             delegate_memory_bytes=math.nan)) + "\n")


def test_each_record_is_one_v3_record_per_metric_it_holds_of_the_tables_columns_and_types(tmp_path, capsys):
    _records(tmp_path / "results")
    out = tmp_path / "v3" / "layoutbench.json"
    assert cli.main(["report", str(tmp_path / "results"), "--v3", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out)
    exported = json.loads(out.read_text())
    errors = [error for index, record in enumerate(exported) for error in _type_errors(record, V3_COLUMNS, f"[{index}]")]
    assert errors == []
    assert all({"benchmark", "model", "metric", "runners"} <= set(record) for record in exported)
    by_program = {(r["model"]["name"], r["benchmark"]["extra_info"]["strategy"], r["metric"]["name"]): r
                  for r in exported}
    assert len(by_program) == len(exported)  # one per model, strategy and metric
    assert sorted(by_program) == sorted([("m1", "ilp-time", name) for name in V3_METRICS]
                                        + [("m1", "bfs-downstream", "transitions"),
                                           ("m3", "ilp-time", "transitions")])  # the failed record: none
    latency = by_program[("m1", "ilp-time", "latency_ms_median")]
    assert latency["metric"]["benchmark_values"] == [2.5] and latency["benchmark"]["dtype"] == "float16"
    assert latency["benchmark"]["extra_info"] == {"strategy": "ilp-time", "strategy_digest": "2e1ea0e80efef7ab",
                                                  "harness_digest": "64d5953fc6b17c4c"}
    assert latency["runners"][0]["gpu_info"] == "llvmpipe (LLVM 15.0.6, 256 bits)"
    assert by_program[("m1", "ilp-time", "transitions")]["metric"]["benchmark_values"] == [3.0]  # the latest
    predicted = by_program[("m1", "ilp-time", "predicted_gpu_ms")]["metric"]["extra_info"]
    assert predicted == {"unit": "ms", "label": "Predicted GPU time of one inference (cost table)",
                         "cost_table": "NVIDIA H100 80GB HBM3:4f2edbea7a08f96e"}


def test_the_shape_check_catches_what_the_table_would_refuse():
    """The check above can fail: a number where the map wants a string, an unknown field."""
    record = {"benchmark": {"name": "b", "mode": "inference", "dtype": "float32", "extra_info": {"seed": 3}},
              "metric": {"name": "m", "benchmark_values": [1.0], "target_value": 0, "extra_info": {}, "unit": "ms"}}
    assert _type_errors(record, V3_COLUMNS, "r") == ["r.benchmark.extra_info = {'seed': 3} is not Map(String, String)",
                                                     "r.metric.unit is no column of the table"]


@pytest.mark.parametrize("arguments, error", [
    (["--v3", "out.jsonl"], "--v3 out.jsonl: name a .json file (the upload action reads only those)"),
    (["--v3", "out.json", "--out", "r.html"], "--out names the HTML report, --v3 the v3 records written in its "
                                              "place: drop one"),
])
def test_a_v3_file_not_json_or_beside_out_is_one_line(tmp_path, monkeypatch, capsys, arguments, error):
    _records(tmp_path / "results")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["report", "results", *arguments]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [f"layoutbench: error: {error}"]
    assert not (tmp_path / "out.json").exists()


def test_results_without_an_exported_metric_are_one_line(tmp_path, capsys):
    RecordStore(tmp_path).append(make_record("m2", "ilp-time", "vulkan-run", "failed", "no shader"))
    assert cli.main(["report", str(tmp_path), "--v3", str(tmp_path / "v3.json")]) == 2
    assert "layoutbench: error: no ok record in" in capsys.readouterr().err
    assert not (tmp_path / "v3.json").exists()
