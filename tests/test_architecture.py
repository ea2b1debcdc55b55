"""The shape of the code and of its output: import contracts, one metric schema, results
of earlier versions still readable, stdout that is only the result on every target."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness import cli
from harness.results.frames import NO_STRATEGY, load
from harness.results.gate import DEFAULT_THRESHOLDS, judge, parse_thresholds
from harness.results.report import write_report
from harness.results.schema import METRICS
from harness.targets import get_target, list_targets

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
V1_RESULTS = Path(__file__).resolve().parent / "data" / "results-v1"
CODE = ("layoutkit", "costmodel", "harness", "strategies", "models", "benchmarks")


def _lint_imports(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "lint-imports"), "--no-cache", "--no-logo"], cwd=root, capture_output=True,
                          text=True, timeout=300, env={"PYTHONPATH": str(root), "PATH": str(BIN)})


def test_import_contracts_hold():
    kept = _lint_imports(ROOT)
    assert kept.returncode == 0, kept.stdout
    assert "Contracts: 14 kept, 0 broken." in kept.stdout


@pytest.mark.parametrize("module, line, contract, shown", [
    ("strategies/bfs_downstream.py", "from harness.targets.vulkan.compile import metrics",
     "strategies import, of ours, only the shared kernel and the cost model",
     "strategies.bfs_downstream -> harness.targets.vulkan.compile.metrics"),
    ("costmodel/table.py", "from strategies import representations",
     "the cost model imports, of ours, only the shared kernel", "costmodel.table -> strategies.representations"),
    ("costmodel/features.py", "import torch", "the cost model imports torch only in its FX adapter",
     "costmodel.features -> torch"),
    ("costmodel/transferred.py", "from costmodel.table import CostTable", "no import cycle inside the cost model",
     ".transferred -> .table"),
    ("layoutkit/errors.py", "import harness.cache", "the shared kernel imports nothing of ours",
     "layoutkit.errors -> harness.cache"),
    ("harness/results/store.py", "from harness.cache import DiskCache",
     "the results layer imports, of ours, only the shared kernel", "harness.results.store -> harness.cache"),
    ("harness/pipeline/model.py", "from harness.targets.vulkan.compile import serialization",
     "the model pipeline imports no target", "harness.pipeline.model -> harness.targets.vulkan.compile.serialization"),
    ("harness/sweep/workers.py", "from harness.sweep import ray_cluster", "no import cycle inside the harness",
     ".workers -> .ray_cluster"),
    ("harness/warm/server.py", "import strategies", "the warm server imports, of ours, only its own package",
     "harness.warm.server -> strategies"),
    ("harness/targets/vulkan/remote/packing.py", "from harness.targets.vulkan.local import runners",
     "Vulkan stages: compile and remote import neither local nor each other",
     "harness.targets.vulkan.remote.packing -> harness.targets.vulkan.local.runners"),
])
def test_a_forbidden_import_breaks_its_contract(tmp_path, module, line, contract, shown):
    for item in ("layoutkit", "costmodel", "harness", "strategies", "models", "benchmarks", "tests", "pyproject.toml"):
        source = ROOT / item
        (shutil.copytree if source.is_dir() else shutil.copy)(source, tmp_path / item)
    edited = tmp_path / module
    edited.write_text(edited.read_text() + f"\n{line}  # noqa\n")
    broken = _lint_imports(tmp_path)
    assert broken.returncode == 1
    assert f"{contract} BROKEN" in broken.stdout
    assert shown in broken.stdout


def _unnamed_packages(root: Path, page: str) -> list[str]:
    """The packages under ``root`` (each directory of our code with an ``__init__.py``) that
    ``page`` does not name as `path/`."""
    found = [init.parent.relative_to(root).as_posix()
             for package in CODE for init in (root / package).rglob("__init__.py")]
    return sorted(name for name in found if f"`{name}/`" not in page)


def test_every_package_is_named_in_the_architecture_page(tmp_path):
    page = (ROOT / "docs" / "architecture.md").read_text()
    assert _unnamed_packages(ROOT, page) == []
    (tmp_path / "harness" / "targets" / "vulkan" / "deploy").mkdir(parents=True)
    (tmp_path / "harness" / "targets" / "vulkan" / "deploy" / "__init__.py").touch()
    assert _unnamed_packages(tmp_path, page) == ["harness/targets/vulkan/deploy"]


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines())


def test_the_command_line_module_stays_within_300_lines():
    assert _lines(ROOT / "harness" / "cli.py") <= 300


def test_readme_stays_within_300_lines_and_modules_within_350():
    assert _lines(ROOT / "README.md") <= 300
    for package in CODE:
        for module in (ROOT / package).rglob("*.py"):
            name = str(module.relative_to(ROOT))
            assert _lines(module) <= 350, f"{name}: {_lines(module)} lines"


# Where the environment may be read: the command line (its parser and the options its
# commands share), the asv suites, the warm server and its client, and a worker's start (what
# a job carries); and the processes the harness or a user starts by a module's name: the
# lowering whose memory is measured (lowering_memory), the VGF host's preparation (vgf_host,
# run by make), and the script a device runs programs with (remote_runner.py, which reads
# ET-VK's device index as its runner does).
ENVIRONMENT_ENTRIES = {"harness/cli.py", "harness/commands/option_types.py", "benchmarks/__init__.py",
                       "benchmarks/_suites.py", "harness/warm/server.py", "harness/warm/command_process.py",
                       "harness/warm/client.py", "harness/sweep/job.py", "harness/targets/vulkan/compile/lowering_memory.py",
                       "harness/targets/arm/vgf_host.py", "harness/targets/vulkan/remote/remote_runner.py"}


def test_the_environment_is_read_at_the_entries():
    for package in CODE:
        for module in (ROOT / package).rglob("*.py"):
            name = str(module.relative_to(ROOT))
            if name not in ENVIRONMENT_ENTRIES:
                text = module.read_text()
                reads = text.count("os.environ") + text.count("os.getenv")
                assert reads == 0, f"{name} reads the environment {reads} times"


def test_every_metric_a_target_declares_is_in_the_schema():
    for name in list_targets():
        unknown = set(get_target(name).metrics) - set(METRICS)
        assert not unknown, f"{name} declares metrics the schema does not know: {unknown}"
    assert DEFAULT_THRESHOLDS == ("transitions=0,transition_bytes=5%,delegate_memory_bytes=5%,ops_outside_delegate=0,"
                                  "latency_ms_median=5%,predicted_gpu_ms=1%,transposes=0,transpose_bytes=5%,cycles=5%")


def test_results_written_before_the_schema_change_load_report_and_gate(tmp_path):
    frame = load(V1_RESULTS).set_index(["strategy", "target"])
    tosa = frame.loc[(NO_STRATEGY, "tosa")]  # was "arm-backend", which is not a strategy
    assert tosa["schema_version"] == 2 and tosa["transposes"] == 18
    assert tosa["max_abs_error"] < 1e-5 and tosa["latency_ms_median"] > 0  # reference_* keys, seconds -> ms
    assert "reference_max_abs_error" not in frame.columns and "reference_seconds" not in frame.columns
    assert frame.loc[("bfs-downstream", "vulkan"), "transitions"] == 9
    results = tmp_path / "v1"
    shutil.copytree(V1_RESULTS, results)
    page = write_report(results).read_text()
    assert "Transitions inserted" in page and "TRANSPOSEs left in the TOSA graph" in page
    verdicts = judge(V1_RESULTS, V1_RESULTS, parse_thresholds(DEFAULT_THRESHOLDS))
    _compared_as_before(verdicts)


def _compared_as_before(verdicts) -> None:
    """Every metric of the earlier schema's ok records unchanged; its vulkan-run records, skipped
    (no runtime), not compared."""
    skipped = verdicts["target"] == "vulkan-run"
    assert set(verdicts.loc[~skipped, "verdict"]) == {"ok"} and {"transitions", "transposes"} <= set(verdicts["metric"])
    assert set(verdicts.loc[skipped, "verdict"]) == {"uncompared"}


@pytest.mark.slow
def test_today_s_records_gate_against_results_of_the_earlier_schema(tmp_path, capsys):
    assert cli.main(["run", "--models", "synthetic_small", "--strategies", "bfs-downstream,bfs-refined,ilp",
                     "--target", "vulkan,tosa", "--out", str(tmp_path), "--format", "json"]) == 0
    capsys.readouterr()
    assert cli.main(["gate", "--baseline", str(V1_RESULTS), "--candidate", str(tmp_path)]) == 0
    assert "gate passed" in capsys.readouterr().err
    _compared_as_before(judge(V1_RESULTS, tmp_path, parse_thresholds(DEFAULT_THRESHOLDS)))


@pytest.mark.slow
def test_stdout_is_only_json_on_every_target(tmp_path):
    """Libraries print (tosa_serializer warns about spec versions on stdout, from Python and
    native code alike); none of it may reach stdout. ``--fresh``: measured, not reused, so
    the libraries do run. A graph of five operators: what they print does not depend on its
    size, and Ethos-U lowering takes seconds on it, a minute on synthetic_small's forty."""
    targets = list_targets()
    result = subprocess.run(
        [str(BIN / "layoutbench"), "run", "--models", "synthetic:5", "--strategies", "bfs-downstream",
         "--target", ",".join(targets), "--out", str(tmp_path), "--format", "json", "--fresh"],
        capture_output=True, text=True, timeout=1200,
    )
    records = json.loads(result.stdout)
    assert sorted(r["target"] for r in records) == sorted(targets)
    assert result.returncode == 0, result.stderr
    assert {r["status"] for r in records} <= {"ok", "skipped"}
    assert "WARNING: Different TOSA spec" in result.stderr  # still said, where it belongs


def test_default_table_fits_a_terminal_and_every_column_is_on_request(tmp_path, capsys):
    argv = ["run", "--models", "synthetic_small", "--strategies", "all", "--out", str(tmp_path)]
    assert cli.main(argv) == 0
    table = capsys.readouterr().out
    assert max(len(line) for line in table.splitlines()) <= 120
    assert " KiB" in table and "optimal" in table and "pass_seconds" not in table
    assert cli.main([*argv, "--columns", "all"]) == 0
    every = capsys.readouterr().out
    assert "serialize_seconds" in every and "pte_bytes" in every
    assert cli.main([*argv, "--columns", "transitions,pte_bytes"]) == 0
    chosen = capsys.readouterr().out.splitlines()[0].split()
    assert chosen == ["transitions", "pte_bytes"]


@pytest.mark.parametrize("command", ["run", "compare"])
def test_run_and_its_old_name(tmp_path, capsys, command):
    assert cli.main([command, "--models", "synthetic_small", "--strategies", "bfs-downstream", "--out", str(tmp_path),
                     "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["transitions"] == 9
