"""Benchmark (not a timed test): ``asv run --quick`` of a commit that changes one strategy,
caches warm, against a cold run of its parent; both halves in one run.

    make bench-asv    # = pytest tests/test_asv_benchmark.py --benchmark-enable -s

In a clone of HEAD a child commit cuts bfs-downstream's downstream search budget from 64
nodes to 16, a one-strategy change. asv runs over that clone with this repository's
configuration, but with an environment, results and layoutbench caches of its own in a
temporary directory. The environment is built and the parent's suite discovered first,
untimed (``asv run --bench just-discover``: as with ``make asv``, the environment is
created once). Then, timed: the parent with empty caches (cold: every model exported and
lowered, every Arm flow run), and the child with the caches that run left (warm). The
vgf host, a download rather than a result, is linked into the empty cache, and so is the
user's ET-VK runtime where there is one: the inference suite then runs its programs (on
lavapipe where the machine has no GPU), else it skips them.

It prints both wall times and where each went (every ``setup_cache``, the benchmarks, the
rest: discovery, the commit's wheel built and installed), keeps asv's output of both runs
(``asv-cold.log``, ``asv-warm.log`` under pytest's temporary directory), and asserts that
the warm run takes at most a quarter of the cold one, that the child's results show the
change, that every value the change cannot reach is the same in both, and that the output
holds nothing the libraries log.
"""

import itertools
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from asv import util as asv_util
from asv.machine import Machine
from asv.results import iter_results_for_machine_and_hash

from .helpers.caches import link_user_caches

REPO = Path(__file__).resolve().parents[1]
ASV = Path(sys.executable).parent / "asv"
CHANGED_STRATEGY = "bfs-downstream"
# Values that depend only on code, tools and models (the lowering's peak memory is read from the
# cache by lowering identity): a changed one must belong to the changed strategy.
DETERMINISTIC = ("bench_vulkan_layout.", "bench_arm.", "bench_ilp.IlpScaling.track_",
                 "bench_layout_pass.Lowering.track_")
# What the libraries print when not silenced: logging's default format (ExecuTorch's INFO line
# per inserted transition), Python's warnings, torch's C++ log, torchao's failed optional loads.
LIBRARY_CHATTER = re.compile(r"\b(DEBUG|INFO|WARNING):\S*:|\w+Warning: |\b[IWE]\d{4} \d\d:\d\d:\d\d|Failed to load ")
# Appended to the class body of strategies/bfs_downstream.py (whose file ends with its docstring).
SHALLOWER_SEARCH = '''
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.max_trace_search_depth = 16
'''


def _git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def _clone_with_a_changed_strategy(clone: Path) -> tuple[str, str]:
    """A clone of HEAD and a child commit that changes one strategy: (parent, child) hashes."""
    _git("clone", "--quiet", "--no-hardlinks", str(REPO), str(clone), cwd=REPO)
    parent = _git("rev-parse", "HEAD", cwd=clone)
    with (clone / "strategies" / "bfs_downstream.py").open("a") as module:
        module.write(SHALLOWER_SEARCH)
    _git("-c", "user.name=bench", "-c", "user.email=bench@localhost", "commit", "--quiet", "-am",
         "bfs-downstream: a 16-node downstream search", cwd=clone)
    return parent, _git("rev-parse", "HEAD", cwd=clone)


def _config(clone: Path, work: Path) -> Path:
    """This repository's asv configuration over the clone, its state kept under ``work``."""
    config = asv_util.load_json(REPO / "asv.conf.json", js_comments=True)
    config.update(repo=str(clone), benchmark_dir=str(clone / "benchmarks"), env_dir=str(work / "env"),
                  results_dir=str(work / "results"), html_dir=str(work / "html"))
    path = work / "asv.conf.json"
    path.write_text(json.dumps(config, indent=1))
    return path


def _asv(config: Path, clone: Path, cache: Path, *args: str, log: Path | None = None) -> float:
    """Run asv in the clone with ``cache`` as layoutbench's cache (its output kept in ``log``);
    its wall time in seconds."""
    start = time.perf_counter()
    result = subprocess.run([str(ASV), "--config", str(config), *args], cwd=clone,
                            env={**os.environ, "LAYOUTBENCH_CACHE_DIR": str(cache)},
                            capture_output=True, text=True, timeout=3 * 3600)
    wall = time.perf_counter() - start
    if log is not None:
        log.write_text(result.stdout + result.stderr)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    return wall


def _results(work: Path, commit: str):
    (results,) = iter_results_for_machine_and_hash(str(work / "results"), Machine.get_unique_machine_name(), commit)
    return results


def _values(results) -> dict:
    """Every benchmark's value per parameter combination (NaN or None where it failed or skipped)."""
    values = {}
    for key in results.get_all_result_keys():
        params = results.get_result_params(key)
        value = results.get_result_value(key, params)
        if not params:
            values[(key, ())] = value
            continue
        values.update({(key, combination): each for combination, each in zip(itertools.product(*params), value)})
    return values


def _same(value, other) -> bool:
    """Equal values, or both missing (a failed or skipped benchmark is NaN or None)."""
    return value == other or (asv_util.is_na(value) and asv_util.is_na(other))


def _breakdown(results, wall: float) -> dict:
    """Where a run's wall time went, by asv's own durations: each ``setup_cache``, the
    benchmarks, and the rest (discovery, the commit's wheel built and installed, asv's start)."""
    setup_caches = {key[len("<setup_cache "):-1]: round(value, 1) for key, value in results.duration.items()
                    if key.startswith("<setup_cache ")}
    benchmarks = sum(value for key, value in results.duration.items() if not key.startswith("<"))
    return {"wall_seconds": round(wall, 1), "setup_cache_seconds": setup_caches,
            "benchmark_seconds": round(benchmarks, 1),
            "rest_seconds": round(wall - sum(setup_caches.values()) - benchmarks, 1)}


def test_asv_run_of_a_one_strategy_commit_with_warm_caches(benchmark, tmp_path):
    if benchmark.disabled:
        pytest.skip("a benchmark: run it with --benchmark-enable (make bench-asv)")
    clone, work, cache = tmp_path / "layoutbench", tmp_path / "asv", tmp_path / "cache"
    work.mkdir()
    parent, child = _clone_with_a_changed_strategy(clone)
    config = _config(clone, work)
    _asv(config, clone, tmp_path / "discovery-cache", "machine", "--yes")
    _asv(config, clone, tmp_path / "discovery-cache", "run", "--bench", "just-discover", f"{parent}^!")
    link_user_caches(cache, "vgf-host", "runtime")
    cold = _asv(config, clone, cache, "run", "--quick", "--show-stderr", f"{parent}^!", log=tmp_path / "asv-cold.log")
    warm = benchmark.pedantic(_asv, (config, clone, cache, "run", "--quick", "--show-stderr", f"{child}^!"),
                              kwargs={"log": tmp_path / "asv-warm.log"}, rounds=1, iterations=1)
    before, after = _results(work, parent), _results(work, child)
    summary = {"cold": _breakdown(before, cold), "warm": _breakdown(after, warm), "warm_share": round(warm / cold, 3)}
    old, new = _values(before), _values(after)
    deterministic = [key for key in old if key[0].startswith(DETERMINISTIC)]
    changed = sorted(f"{key[0]}{list(key[1])}: {old[key]} -> {new.get(key)}"
                     for key in deterministic if not _same(old[key], new.get(key)))
    summary["changed"] = changed
    summary["chatter"] = sorted({line.strip()[:200] for run in ("cold", "warm")
                                 for line in (tmp_path / f"asv-{run}.log").read_text().splitlines()
                                 if LIBRARY_CHATTER.search(line)})
    benchmark.extra_info.update(summary)
    print(json.dumps(summary, indent=1))
    assert not all(asv_util.is_na(old[key]) for key in deterministic), "the cold run measured nothing"
    assert changed and all(f"'{CHANGED_STRATEGY}'" in line for line in changed), changed
    assert not summary["chatter"], summary["chatter"]
    assert warm <= cold / 4, summary
