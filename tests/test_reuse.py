"""Re-runs reuse exactly what is unchanged and measure the rest: a record's identity is the
model, the strategy's code (its base classes and helpers included), the harness code and
the tool versions, never a commit id of a dirty tree."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.sweep.planning import run_sweep
from harness.sweep.execution import Execution
from harness.results import provenance
from harness.results.store import RecordStore

from .helpers.caches import with_shared_entries

ROOT = Path(__file__).resolve().parent.parent
DETERMINISTIC = ("transitions", "transition_bytes", "delegate_memory_bytes", "transition_memory_bytes",
                 "partitions", "delegate_ops", "ops_outside_delegate", "pte_bytes", "own_clones")
USER_PASS = """from executorch.backends.vulkan._passes.tag_memory_meta_pass import TagMemoryMetaPass


class Mine(TagMemoryMetaPass):
    pass
"""


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> Path:
    """A working copy of the project (as a dirty tree would be), with its own caches, and a
    user's plug-in module beside it."""
    root = tmp_path_factory.mktemp("checkout")
    for item in ("layoutkit", "costmodel", "harness", "strategies", "models", "tests"):
        shutil.copytree(ROOT / item, root / item, ignore=shutil.ignore_patterns("__pycache__"))
    (root / "mymod.py").write_text(USER_PASS)
    with_shared_entries(root / "cache")
    return root


def _run(checkout: Path, strategies: str, out: str = "results", *extra) -> tuple[dict, str]:
    env = {**os.environ, "PYTHONPATH": str(checkout), "LAYOUTBENCH_CACHE_DIR": str(checkout / "cache")}
    result = subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", "--models", "synthetic_small", "--strategies", strategies,
         "--out", out, "--format", "json", *extra], cwd=checkout, env=env, capture_output=True, text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stderr
    return {r["strategy"]: r for r in json.loads(result.stdout)}, result.stderr.strip().splitlines()[-1]


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new))


STRATEGIES = "bfs-downstream,dfs-upstream,tests.helpers.user_strategies:PreferChannelsPacked,mymod:Mine"


@pytest.mark.slow
def test_unchanged_is_reused_and_changed_code_is_measured_again(checkout):
    first, said = _run(checkout, STRATEGIES)
    assert "4 measured, 0 reused" in said
    assert (first["mymod:Mine"]["transitions"], first["bfs-downstream"]["transitions"]) == (9, 9)

    again, said = _run(checkout, STRATEGIES)
    assert "0 measured, 4 reused" in said
    assert again == first

    # A built-in edited in the working tree: only it is measured again.
    _edit(checkout / "strategies" / "dfs_upstream.py", "def _users_to_trace(self, node):",
          "def _users_to_trace(self, node):  # edited")
    _, said = _run(checkout, STRATEGIES)
    assert "1 measured, 3 reused" in said

    # A base class edited: its subclass (a user's strategy) is measured again, nothing else.
    _edit(checkout / "strategies" / "all_width_packed.py", "preferred: utils.TensorRepSet = WIDTH_PACKED_ANY_STORAGE",
          "preferred: utils.TensorRepSet = WIDTH_PACKED_ANY_STORAGE  # edited")
    _, said = _run(checkout, STRATEGIES)
    assert "1 measured, 3 reused" in said

    # The plug-in edited (the case: now it subclasses AllWidthPacked): measured, and different.
    (checkout / "mymod.py").write_text("from strategies.all_width_packed import AllWidthPacked\n\n\n"
                                       "class Mine(AllWidthPacked):\n    pass\n")
    edited, said = _run(checkout, STRATEGIES)
    assert "1 measured, 3 reused" in said
    assert edited["mymod:Mine"]["transitions"] == 13  # all-width-packed's count on synthetic_small

    # Another results directory on the same code: everything comes from the record cache.
    _, said = _run(checkout, STRATEGIES, "elsewhere")
    assert "0 measured, 4 reused" in said


@pytest.mark.slow
def test_a_reused_record_is_what_a_fresh_measurement_gives(checkout):
    _run(checkout, "bfs-downstream,bfs-refined,ilp")
    reused, said = _run(checkout, "bfs-downstream,bfs-refined,ilp")
    fresh, said_fresh = _run(checkout, "bfs-downstream,bfs-refined,ilp", "fresh", "--fresh")
    assert "0 measured, 3 reused" in said and "3 measured, 0 reused" in said_fresh
    for strategy, record in fresh.items():
        assert record["identity"] == reused[strategy]["identity"]
        assert {m: record[m] for m in DETERMINISTIC} == {m: reused[strategy][m] for m in DETERMINISTIC}


def test_a_tool_version_change_measures_again(tmp_path, monkeypatch):
    monkeypatch.setenv("LAYOUTBENCH_CACHE_DIR", str(with_shared_entries(tmp_path / "cache")))
    store = RecordStore(tmp_path / "results")
    assert len(run_sweep(["synthetic_small"], ["bfs-downstream"], "vulkan", store).measured) == 1
    assert len(run_sweep(["synthetic_small"], ["bfs-downstream"], "vulkan", store).reused) == 1
    real = provenance._package_version
    monkeypatch.setattr(provenance, "_package_version", lambda name: "9.9.9" if name == "highspy" else real(name))
    again = run_sweep(["synthetic_small"], ["bfs-downstream"], "vulkan", store)
    assert len(again.measured) == 1
    assert again.measured[0]["environment"]["tools"]["highspy"] == "9.9.9"


def test_a_failure_the_code_would_repeat_is_reused_with_its_log(tmp_path, monkeypatch):
    monkeypatch.setenv("LAYOUTBENCH_CACHE_DIR", str(with_shared_entries(tmp_path / "cache")))
    crashes, in_process = "tests.helpers.user_strategies:Crashes", Execution(workers=0)
    [failed] = run_sweep(["synthetic_small"], [crashes], "vulkan", RecordStore(tmp_path / "a"),
                         execution=in_process).measured
    assert failed["status"] == "failed" and failed["repeatable"] is True
    again = run_sweep(["synthetic_small"], [crashes], "vulkan", RecordStore(tmp_path / "b"), execution=in_process)
    [reused] = again.reused
    assert not again.measured and reused["reason"] == failed["reason"] == "RuntimeError: a bug in the user's pass"
    log = Path(reused["log"])
    assert log.parent == (tmp_path / "b" / "logs").resolve() and log.read_text() == Path(failed["log"]).read_text()
