"""Benchmark (not a timed test): the quick zoo x every strategy with ``--fresh``, once with
a cold lowering-prefix cache and once warm, both halves in one run.

    make bench-cache    # = pytest tests/test_cache_benchmark.py --benchmark-enable -s

Both halves start from the same warm export cache (copied from the user's), so the
difference is the lowering prefix. No cost table is given (the tests' own is taken out
of the environment): ``ilp-time`` is skipped before anything is lowered, and the run is the
six layout strategies. From the records' own timing fields it reports how much
of each run's wall time is the strategies' own work (their layout pass and the rest of
preprocess, ``finish_seconds``) and how much is outside it (serialization of the .pte,
``serialize_seconds``, among the rest: reported on its own); a run skipped without
``--benchmark-enable``, as every benchmark here.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from costmodel.table import COSTS_ENV

from .helpers.caches import link_user_caches

LAYOUTBENCH = Path(sys.executable).parent / "layoutbench"


def _sweep(out: Path, cache: Path) -> dict:
    environment = {name: value for name, value in os.environ.items() if name != COSTS_ENV}
    start = time.perf_counter()
    result = subprocess.run(
        [str(LAYOUTBENCH), "run", "--zoo", "quick", "--strategies", "all", "--fresh", "--workers", "1",
         "--out", str(out), "--format", "json"], env={**environment, "LAYOUTBENCH_CACHE_DIR": str(cache)},
        capture_output=True, text=True, timeout=3600,
    )
    wall = time.perf_counter() - start
    assert result.returncode == 0, result.stderr
    records = json.loads(result.stdout)
    measured = [r for r in records if r["status"] == "ok"]
    own = sum(r["finish_seconds"] for r in measured)
    loads = {r["model"]: r.get("prefix_load_seconds") or 0 for r in measured}  # once per model
    return {"wall_seconds": wall, "own_seconds": own, "wall_over_own": wall / own, "outside_share": 1 - own / wall,
            "serialize_seconds": sum(r["serialize_seconds"] for r in measured),
            "prefix_load_seconds": sum(loads.values()), "records": records}


def test_quick_zoo_with_a_cold_and_a_warm_prefix_cache(benchmark, tmp_path):
    if benchmark.disabled:
        pytest.skip("a benchmark: run it with --benchmark-enable (make bench-cache)")
    cache = tmp_path / "cache"
    link_user_caches(cache, "exports")
    cold = _sweep(tmp_path / "cold", cache)
    warm = benchmark.pedantic(_sweep, (tmp_path / "warm", cache), rounds=1, iterations=1)
    summary = {half: {k: round(v, 3) for k, v in run.items() if k != "records"}
               for half, run in (("cold", cold), ("warm", warm))}
    summary["speedup"] = round(cold["wall_seconds"] / warm["wall_seconds"], 2)
    benchmark.extra_info.update(summary)
    print(json.dumps(summary, indent=1))
    same = ("status", "transitions", "transition_bytes", "delegate_memory_bytes", "pte_bytes")
    assert [[r.get(m) for m in same] for r in cold["records"]] == [[r.get(m) for m in same] for r in warm["records"]]
    assert warm["wall_over_own"] <= 1.5, summary
    assert summary["speedup"] >= 6, summary
