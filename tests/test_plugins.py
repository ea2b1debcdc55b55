"""Users' own models and strategies: named by module, by file, by entry point, or (models)
as a saved program; each measured by the command line and an asv suite like a built-in."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import models
from benchmarks import bench_vulkan_layout
from tests.helpers.user_models import tiny_convnet

LAYOUTBENCH = Path(sys.executable).parent / "layoutbench"
TESTS = Path(__file__).resolve().parent
FACTORY = "tests.helpers.user_models:tiny_convnet"


def _run(*args, cwd=None):
    return subprocess.run([str(LAYOUTBENCH), *args], capture_output=True, text=True, timeout=900, cwd=cwd)


@pytest.fixture(scope="module")
def saved_program(tmp_path_factory) -> Path:
    module, inputs = tiny_convnet()
    path = tmp_path_factory.mktemp("saved") / "tiny_convnet.pt2"
    torch.export.save(torch.export.export(module.eval(), inputs), path)
    return path


@pytest.fixture(scope="module")
def edited_pass(tmp_path_factory) -> tuple[Path, Path]:
    """Copies of ExecuTorch's installed tag_memory_meta_pass.py: one as it is, one whose
    downstream search budget is cut from 64 nodes to 4 (one changed decision)."""
    from executorch.backends.vulkan._passes import tag_memory_meta_pass

    root = tmp_path_factory.mktemp("edited")
    original = Path(tag_memory_meta_pass.__file__)
    unchanged, edited = root / "unchanged" / original.name, root / "edited" / original.name
    for copy in (unchanged, edited):
        copy.parent.mkdir()
        shutil.copy(original, copy)
    text = edited.read_text()
    assert text.count("self.max_trace_search_depth = 64") == 1
    edited.write_text(text.replace("self.max_trace_search_depth = 64", "self.max_trace_search_depth = 4"))
    return unchanged, edited


@pytest.mark.slow
def test_user_models_by_module_file_and_saved_program_on_the_command_line(tmp_path, saved_program):
    by_file = f"{TESTS / 'helpers' / 'user_models.py'}:tiny_convnet"
    names = [FACTORY, by_file, str(saved_program)]
    result = _run("run", "--models", ",".join(names), "--strategies", "bfs-downstream", "--out", str(tmp_path),
                  "--format", "json")
    assert result.returncode == 0, result.stderr
    records = json.loads(result.stdout)
    assert [r["model"] for r in records] == names
    for record in records:
        assert record["status"] == "ok", record["reason"]
        assert record["input_shapes"] == [[1, 3, 16, 16]] and record["partitions"] == 1
    # The same module, however it is named, lowers to the same program.
    assert len({(r["transitions"], r["delegate_memory_bytes"], r["pte_bytes"]) for r in records}) == 1


def test_user_models_in_an_asv_suite(monkeypatch, saved_program):
    names = [FACTORY, str(saved_program)]
    monkeypatch.setattr(bench_vulkan_layout.VulkanLayout, "params", (names, ["bfs-downstream"]))
    suite = bench_vulkan_layout.VulkanLayout()
    records = suite.setup_cache()
    for name in names:
        suite.setup(records, name, "bfs-downstream")
        assert suite.track_transitions(records, name, "bfs-downstream") == records[(name, "bfs-downstream")][
            "transitions"]
        assert suite.track_delegate_memory_bytes(records, name, "bfs-downstream") > 0


def test_user_model_by_entry_point(tmp_path, monkeypatch):
    dist = tmp_path / "user_models-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: user-models\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[{models.ENTRY_POINT_GROUP}]\ntiny-convnet = {FACTORY}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "tiny-convnet" in models.list_models()
    spec = models.create("tiny-convnet")
    assert spec.name == "tiny-convnet" and spec.input_shapes == [[1, 3, 16, 16]]


@pytest.mark.parametrize(
    "name, message",
    [
        ("tests.helpers.user_models:missing", "unknown model 'tests.helpers.user_models:missing'"),
        ("no_such_package.models:factory", "cannot import 'no_such_package.models'"),
        ("/nonexistent/model.pt2", "no saved program at /nonexistent/model.pt2"),
    ],
)
def test_bad_user_models_are_one_line_and_exit_2(tmp_path, name, message):
    result = _run("run", "--models", name, "--out", str(tmp_path))
    assert result.returncode == 2 and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.stderr


@pytest.mark.slow
def test_a_factory_returning_the_wrong_thing_is_a_failed_record(tmp_path):
    result = _run("run", "--models", "tests.helpers.user_models:not_a_model", "--strategies", "bfs-downstream",
                  "--out", str(tmp_path), "--format", "json")
    assert result.returncode == 1
    [record] = json.loads(result.stdout)
    assert record["status"] == "failed"
    assert record["reason"] == ("model factory 'tests.helpers.user_models:not_a_model' returned str; "
                                "return (module, example_inputs) or a models.ModelSpec")


@pytest.mark.slow
def test_an_edited_copy_of_the_pass_is_measured_beside_the_installed_one(tmp_path, edited_pass):
    unchanged, edited = edited_pass
    names = ["bfs-downstream", f"{unchanged}:TagMemoryMetaPass", f"{edited}:TagMemoryMetaPass"]
    result = _run("run", "--models", "synthetic_small", "--strategies", ",".join(names), "--out", str(tmp_path),
                  "--format", "json")
    assert result.returncode == 0, result.stderr
    transitions = {r["strategy"]: r["transitions"] for r in json.loads(result.stdout)}
    # The copy as installed decides exactly as bfs-downstream; the edit (a 4-node search) costs
    # synthetic_small one transition, as tests/helpers/user_strategies.ShallowSearch does by subclassing.
    assert transitions == {names[0]: 9, names[1]: 9, names[2]: 10}


@pytest.mark.slow
def test_an_unexpected_error_is_a_failed_record_with_its_traceback_logged(tmp_path):
    result = _run("run", "--models", "synthetic_small", "--strategies", "bfs-downstream,tests.helpers.user_strategies:Crashes",
                  "--out", str(tmp_path), "--format", "json")
    assert result.returncode == 1
    ok, crashed = json.loads(result.stdout)
    assert ok["status"] == "ok" and crashed["status"] == "failed"
    assert crashed["reason"] == "RuntimeError: a bug in the user's pass"
    log = Path(crashed["log"])
    assert log.parent == (tmp_path / "logs").resolve()
    assert "Traceback" in log.read_text() and "a bug in the user's pass" in log.read_text()
    assert "synthetic_small / tests.helpers.user_strategies:Crashes: RuntimeError: a bug in the user's pass" in result.stderr
