"""Benchmark (not a timed test): the quick zoo x every strategy with ``--fresh``, measured by
one worker and by two, both halves in one run, from the same warm caches.

    make bench-workers    # = pytest tests/test_workers_benchmark.py --benchmark-enable -s

Each model is one job; the speed-up is bounded by the longest model and by how evenly the
rest fill the other worker. Skipped without ``--benchmark-enable``, as every benchmark here.
"""

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

LAYOUTBENCH = Path(sys.executable).parent / "layoutbench"


def _sweep(out: Path, workers: int) -> dict:
    start = time.perf_counter()
    result = subprocess.run(
        [str(LAYOUTBENCH), "run", "--zoo", "quick", "--strategies", "all", "--fresh", "--workers", str(workers),
         "--out", str(out), "--format", "json"], capture_output=True, text=True, timeout=3600)
    wall = time.perf_counter() - start
    assert result.returncode == 0, result.stderr
    return {"wall_seconds": wall, "records": json.loads(result.stdout)}


def test_quick_zoo_on_one_and_two_workers(benchmark, tmp_path):
    if benchmark.disabled:
        pytest.skip("a benchmark: run it with --benchmark-enable (make bench-workers)")
    _sweep(tmp_path / "warm-up", 2)  # fills the caches both halves read
    one = _sweep(tmp_path / "one", 1)
    two = benchmark.pedantic(_sweep, (tmp_path / "two", 2), rounds=1, iterations=1)
    summary = {"one_worker_seconds": round(one["wall_seconds"], 1), "two_workers_seconds": round(two["wall_seconds"], 1),
               "speedup": round(one["wall_seconds"] / two["wall_seconds"], 2)}
    benchmark.extra_info.update(summary)
    print(json.dumps(summary, indent=1))
    same = ("model", "strategy", "status", "transitions", "pte_bytes")
    assert [[r[k] for k in same] for r in one["records"]] == [[r[k] for k in same] for r in two["records"]]
    assert summary["speedup"] >= 1.6, summary
