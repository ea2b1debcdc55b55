"""The command line: outputs, errors, resumable records."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from harness import cli
from harness.results.frames import load, to_long
from harness.results.store import RecordStore
from harness.targets import get_target
from harness.sweep.planning import run_sweep

LAYOUTBENCH = Path(sys.executable).parent / "layoutbench"
REQUIRED_KEYS = {
    "model", "strategy", "target", "transitions", "transition_bytes", "delegate_memory_bytes",
    "partitions", "pass_seconds", "optimal", "status", "reason",
}


def _run(*args):
    return subprocess.run([str(LAYOUTBENCH), *args], capture_output=True, text=True, timeout=600)


def test_console_script_lists():
    listed = _run("list", "strategies")
    assert listed.returncode == 0
    assert {"bfs-downstream", "dfs-upstream", "all-width-packed"} <= set(listed.stdout.split())
    assert "synthetic_small" in _run("list", "models", "--zoo", "quick").stdout.split()


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--models", "resnet9000"], "unknown model 'resnet9000'; known: "),
        # Each case starts a command (10-12 s); the fast tier keeps the first.
        pytest.param(["--models", "resnet18", "--strategies", "nope"], "unknown strategy 'nope'; known: ",
                     marks=pytest.mark.slow),
        pytest.param(["--zoo", "huge"], "unknown zoo 'huge'; known: ", marks=pytest.mark.slow),
        pytest.param(["--models", "resnet18", "--target", "npu"], "unknown target 'npu'; known: ethos-u55-128",
                     marks=pytest.mark.slow),
    ],
)
def test_bad_names_fail_with_one_line(tmp_path, args, expected):
    result = _run("compare", *args, "--out", str(tmp_path))
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"layoutbench: error: {expected}")


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--models", ""], "no model named in ''; name one or more (see `layoutbench list models`)"),
        (["--models", "synthetic_small", "--strategies", ""], "no strategy named in ''; name one or more, or all"),
        (["--models", "synthetic_small", "--strategies", ",,"], "no strategy named in ',,'; name one or more, or all"),
        (["--models", "synthetic_small", "--target", ""], "no target named in ''; known: ethos-u55-128"),
    ],
)
def test_an_empty_list_of_names_is_one_line_and_nothing_is_measured(tmp_path, capsys, args, expected):
    out = tmp_path / "results"
    assert cli.main(["run", *args, "--out", str(out), "--workers", "0"]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"layoutbench: error: {expected}")
    assert not out.exists()


def test_an_empty_out_names_no_directory_and_nothing_is_written(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["run", "--models", "synthetic_small", "--strategies", "bfs-downstream", "--out", "",
                     "--workers", "0"]) == 2
    assert capsys.readouterr().err == ("layoutbench: error: an empty path names no results directory; name one "
                                       "(e.g. --out results)\n")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("port", ["99999", "-1", "0"])
def test_a_port_out_of_range_is_refused_by_the_parser_before_any_work(capsys, port):
    with pytest.raises(SystemExit) as exited:
        cli.main(["explore", "synthetic_small", "--strategy", "bfs-downstream", "--port", port])
    assert exited.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"layoutbench explore: error: argument --port: expected a whole number from 1 to 65535, not {port!r}")


def test_a_reader_that_goes_away_ends_the_command_quietly(tmp_path):
    """``layoutbench list models --zoo full | head -c0``: as a command SIGPIPE ends, no traceback."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # gone before the first byte is written
    try:
        listed = subprocess.run([str(LAYOUTBENCH), "list", "models", "--zoo", "full"], stdout=write_end,
                                stderr=subprocess.PIPE, text=True, timeout=600)
    finally:
        os.close(write_end)
    assert (listed.returncode, listed.stderr) == (128 + signal.SIGPIPE, "")


@pytest.mark.slow
def test_compare_json_is_pipeable_and_resumes(tmp_path):
    args = ["compare", "--models", "synthetic_small", "--strategies", "bfs-downstream,dfs-upstream",
            "--out", str(tmp_path), "--format", "json"]
    first = _run(*args)
    assert first.returncode == 0, first.stderr
    records = json.loads(first.stdout)
    assert [r["strategy"] for r in records] == ["bfs-downstream", "dfs-upstream"]
    for record in records:
        assert REQUIRED_KEYS <= set(record)
        assert record["status"] == "ok" and record["optimal"] is None
        assert record["transitions"] > 0 and record["partitions"] == 1
        assert record["torch_version"].startswith("2.13.0") and record["executorch_version"] == "1.5.1"
    store = RecordStore(tmp_path)
    assert len(store.read()) == 2

    again = _run(*args)
    assert again.returncode == 0 and json.loads(again.stdout) == records
    assert len(store.read()) == 2, "a re-run must skip what is done"

    table = _run(*args[:-2], "--format", "table")
    assert "bfs-downstream" in table.stdout and "transitions" in table.stdout
    csv = _run(*args[:-2], "--format", "csv")
    assert csv.stdout.splitlines()[0].startswith("model,strategy,target,status")


def test_interrupted_sweep_keeps_finished_records_and_resumes(tmp_path):
    store = RecordStore(tmp_path)
    run_sweep(["synthetic_small"], ["bfs-downstream"], "vulkan", store)
    with store.path.open("a") as out:
        out.write('{"model": "synthetic_small", "strat')  # cut short by a kill
    sweep = run_sweep(["synthetic_small"], ["bfs-downstream", "all-width-packed"], "vulkan", store)
    assert [r["strategy"] for r in sweep.records] == ["bfs-downstream", "all-width-packed"]
    assert sweep.reused[0]["strategy"] == "bfs-downstream"  # from the results directory
    assert len(store.read()) == 2
    frame = load(tmp_path)
    assert sorted(frame["strategy"]) == ["all-width-packed", "bfs-downstream"]
    assert set(get_target("vulkan").metrics) <= set(frame.columns)
    tidy = to_long(frame)
    assert {"transitions", "delegate_memory_bytes"} <= set(tidy["metric"])
    assert len(tidy[tidy.metric == "transitions"]) == 2


def test_invalid_strategy_is_a_failed_record_and_nonzero_exit(tmp_path, capsys):
    code = cli.main(["compare", "--models", "synthetic_small", "--strategies",
                     "bfs-downstream,tests.helpers.user_strategies:IgnoresOperatorRules",
                     "--out", str(tmp_path), "--format", "json"])
    assert code == 1
    records = json.loads(capsys.readouterr().out)
    assert [r["status"] for r in records] == ["ok", "failed"]
    assert "BUFFER/HEIGHT_PACKED" in records[1]["reason"]


def test_model_that_fails_to_export_is_reported(tmp_path, capsys):
    name = "tests.helpers.user_models:data_dependent"
    code = cli.main(["compare", "--models", f"{name},synthetic_small", "--strategies",
                     "bfs-downstream", "--out", str(tmp_path), "--format", "json"])
    captured = capsys.readouterr()
    assert code == 1
    records = json.loads(captured.out)
    assert [r["status"] for r in records] == ["failed", "ok"]
    assert "failed to export" in records[0]["reason"]
    assert f"{name} / bfs-downstream: model '{name}' failed to export" in captured.err


def test_columns_name_record_fields_and_an_unknown_one_fails_with_one_line_before_measuring(tmp_path, capsys):
    run = ["run", "--models", "synthetic_small", "--strategies", "dfs-upstream", "--workers", "0"]
    assert cli.main([*run, "--out", str(tmp_path / "a"), "--columns", "model,strategy,transitions"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == ["transitions"] and table[2].split()[:2] == ["synthetic_small", "dfs-upstream"]
    assert cli.main([*run, "--out", str(tmp_path / "b"), "--columns", "transitions,no_such_field"]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("layoutbench: error: --columns: no record has no_such_field; "
                                                   "fields: all, ")
    assert not (tmp_path / "b").exists()  # nothing measured


def test_a_column_only_a_plug_in_strategy_could_add_is_checked_against_its_records(tmp_path, capsys):
    run = ["run", "--models", "synthetic_small", "--strategies", "tests.helpers.user_strategies:ShallowSearch",
           "--out", str(tmp_path), "--workers", "0", "--columns", "transitions,shallow_field"]
    assert cli.main(run) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[-1].startswith("layoutbench: error: --columns: no record has shallow_field; fields: ")
    assert len(RecordStore(tmp_path).read()) == 1  # measured and kept all the same
