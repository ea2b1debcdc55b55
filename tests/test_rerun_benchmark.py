"""Benchmark (not a timed test): the edit-measure loop's re-run. The quick zoo x every
strategy plus one under edit (a plug-in file deriving from dfs-upstream) into a results
directory that holds them all; the plug-in edited, then the same command again, once
without a warm server and once through one, both in one run.

    make bench-rerun    # = pytest tests/test_rerun_benchmark.py --benchmark-enable -s

Both re-runs measure the edited strategy's six records and reuse the rest. The caches are
the user's exports and lowering prefixes, linked into a cache of the benchmark's own (so
its server is its own); a run skipped without ``--benchmark-enable``, as every benchmark here.
"""

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from costmodel.table import COSTS_ENV
import strategies

from .helpers.caches import link_user_caches

LAYOUTBENCH = Path(sys.executable).parent / "layoutbench"
EDITED = "from strategies.dfs_upstream import DfsUpstream\n\n\nclass Edited(DfsUpstream):\n    pass\n"


def _layoutbench(environment: dict, cwd: Path, *args: str) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    result = subprocess.run([str(LAYOUTBENCH), *args], env=environment, cwd=cwd, capture_output=True, text=True,
                            timeout=3600)
    wall = time.perf_counter() - start
    assert result.returncode == 0, result.stderr
    return wall, result


def test_rerun_after_editing_one_strategy(benchmark, tmp_path):
    if benchmark.disabled:
        pytest.skip("a benchmark: run it with --benchmark-enable (make bench-rerun)")
    cache = tmp_path / "cache"
    link_user_caches(cache, "exports", "prefixes")
    skip = (COSTS_ENV, "LAYOUTBENCH_NO_SERVER")
    environment = {k: v for k, v in os.environ.items() if k not in skip} | {"LAYOUTBENCH_CACHE_DIR": str(cache)}
    cold_environment = {**environment, "LAYOUTBENCH_NO_SERVER": "1"}
    plug = tmp_path / "edited.py"
    plug.write_text(EDITED)
    every = ",".join([*strategies.list_strategies(), "edited.py:Edited"])
    run = ["run", "--zoo", "quick", "--strategies", every, "--out", "results", "--format", "json"]
    _layoutbench(cold_environment, tmp_path, *run)  # every record, once

    def rerun(environment: dict) -> dict:
        plug.write_text(plug.read_text() + f"# edited at {time.time_ns()}\n")
        wall, result = _layoutbench(environment, tmp_path, *run)
        measured = int(re.search(r"(\d+) measured", result.stderr).group(1))
        return {"wall_seconds": wall, "measured": measured, "records": json.loads(result.stdout)}

    cold = rerun(cold_environment)
    _layoutbench(environment, tmp_path, "serve", "--idle-minutes", "5")
    try:
        warm = benchmark.pedantic(rerun, (environment,), rounds=1, iterations=1)
    finally:
        _layoutbench(environment, tmp_path, "serve", "--stop")
    summary = {"without_server_seconds": round(cold["wall_seconds"], 3),
               "warm_server_seconds": round(warm["wall_seconds"], 3),
               "ratio": round(warm["wall_seconds"] / cold["wall_seconds"], 3)}
    benchmark.extra_info.update(summary)
    print(json.dumps(summary, indent=1))
    assert cold["measured"] == warm["measured"] == 6  # the edited strategy's records only
    same = ("model", "strategy", "status", "transitions", "transition_bytes", "pte_bytes")
    assert [[r.get(m) for m in same] for r in cold["records"]] == [[r.get(m) for m in same] for r in warm["records"]]
    assert summary["ratio"] <= 0.5, summary
