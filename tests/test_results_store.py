"""A results directory: one writer at a time, a bad --out, lines that are not records, and
records whose metric is not a number."""

import errno
import json
import os
import socket
import subprocess
import sys
import textwrap

import pytest

from costmodel.table import COSTS_ENV
from harness import cli
from harness.results.results_dir import ResultsDir
from harness.results.store import RecordStore, key, make_record
from harness.sweep.execution import Execution
from harness.sweep.planning import run_sweep
from harness.targets.base import MeasureContext
import strategies
from tests.helpers.caches import with_shared_entries
from tests.helpers.failing_writes import fail_writes

STRATEGIES = strategies.list_strategies()


def _layoutbench(*args, env=None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "harness.cli", *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env=env)


def _two_sweeps_at_once(out, cache, *options) -> list[tuple[int, str]]:
    """Two ``run`` commands into ``out``, started together; their exit codes and stderr. A
    cache of their own: neither reuses records another run left in the user's."""
    env = {**os.environ, "LAYOUTBENCH_CACHE_DIR": str(with_shared_entries(cache))}
    args = ["run", "--models", "synthetic_small", "--strategies", "all", "--out", str(out), "--workers", "0",
            "--format", "json", *options]
    commands = [_layoutbench(*args, env=env) for _ in range(2)]
    return [(command.wait(timeout=600), command.stderr.read()) for command in commands]


def _keys(lines: list[str]) -> list[tuple]:
    return [key(json.loads(line)) for line in lines]


@pytest.mark.slow
def test_a_second_sweep_into_the_directory_waits_and_reuses_what_the_first_measured(tmp_path):
    results = _two_sweeps_at_once(tmp_path / "same", tmp_path / "cache")
    assert [code for code, _ in results] == [0, 0], results
    lines = (tmp_path / "same" / "records.jsonl").read_text().splitlines()
    assert sorted(_keys(lines)) == [("synthetic_small", s, "vulkan") for s in STRATEGIES]  # each once
    said = sorted(err.strip().splitlines()[-1].split(": ", 2)[-1] for _, err in results)
    count = len(STRATEGIES)
    assert said[0].startswith(f"0 measured, {count} reused") and said[1].startswith(f"{count} measured, 0 reused"), said


@pytest.mark.slow
def test_two_fresh_sweeps_into_the_directory_write_one_after_the_other(tmp_path):
    results = _two_sweeps_at_once(tmp_path / "same", tmp_path / "cache", "--fresh")
    assert [code for code, _ in results] == [0, 0], results
    keys = _keys((tmp_path / "same" / "records.jsonl").read_text().splitlines())
    expected = [("synthetic_small", s, "vulkan") for s in STRATEGIES]
    count = len(STRATEGIES)
    assert sorted(keys[:count]) == expected and sorted(keys[count:]) == expected, keys  # two unbroken runs of lines


def _hold_writer_lock(directory, then: str) -> subprocess.Popen:
    """A process that holds the directory's writer lock, says so, then runs ``then``."""
    code = textwrap.dedent(f"""
        import os, signal, sys, time
        from harness.results.store import RecordStore
        with RecordStore(sys.argv[1]).writing():
            print("held", flush=True)
            {then}
    """)
    holder = subprocess.Popen([sys.executable, "-c", code, str(directory)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline() == "held\n"
    return holder


def _holder_words(pid: int) -> str:
    return f"is being written by pid {pid} on {socket.gethostname()} ("


def test_a_sweep_waits_for_the_writer_and_says_who_it_is(tmp_path, capfd):
    """As asv's set-up and profile sweep: through run_sweep."""
    holder = _hold_writer_lock(tmp_path, "time.sleep(3)")
    sweep = run_sweep(["synthetic_small"], ["bfs-downstream"], "vulkan", RecordStore(tmp_path),
                      execution=Execution(workers=0))
    # The holder lets go as its block ends, a moment before its process does.
    assert holder.wait(timeout=30) == 0
    assert [r["status"] for r in sweep.records] == ["ok"]
    waiting = [line for line in capfd.readouterr().err.splitlines() if "is being written by" in line]
    assert len(waiting) == 1
    assert waiting[0].startswith(f"layoutbench: {tmp_path} {_holder_words(holder.pid)}")
    assert f"(-c {tmp_path}) since " in waiting[0] and waiting[0].endswith("; waiting for it to finish")


@pytest.mark.slow
def test_no_wait_stops_with_one_line_naming_the_writer(tmp_path):
    with RecordStore(tmp_path).writing():
        command = _layoutbench("run", "--models", "synthetic_small", "--strategies", "bfs-downstream", "--out",
                               str(tmp_path), "--workers", "0", "--no-wait")
        code, err = command.wait(timeout=600), command.stderr.read()
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"layoutbench: error: {tmp_path} {_holder_words(os.getpid())}")
    assert lines[0].endswith("; wait for it (without --no-wait), or use another --out")
    assert not (tmp_path / "records.jsonl").exists()


def test_the_lock_of_a_killed_writer_is_taken_over_in_one_line(tmp_path, capsys):
    holder = _hold_writer_lock(tmp_path, "os.kill(os.getpid(), signal.SIGKILL)")
    assert holder.wait(timeout=60) == -9
    with RecordStore(tmp_path).writing():
        pass
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"layoutbench: taking over {tmp_path} from pid {holder.pid} on {socket.gethostname()}")
    assert lines[0].endswith("which ended without letting go of it")
    with RecordStore(tmp_path).writing():  # let go of: the next writer takes it over silently
        pass
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("where, why", [("afile", "it is a file"), ("afile/results", "Not a directory")])
def test_an_out_that_cannot_be_a_directory_is_one_line_and_exit_2(tmp_path, capsys, where, why):
    (tmp_path / "afile").write_text("not results")
    out = tmp_path / where
    code = cli.main(["run", "--models", "synthetic_small", "--strategies", "bfs-downstream", "--out", str(out),
                     "--workers", "0"])
    assert code == 2
    assert capsys.readouterr().err == (f"layoutbench: error: cannot write results into {out}: {why}; "
                                       "name a directory with --out\n")


def _results(directory, *lines: str):
    directory.mkdir()
    (directory / "records.jsonl").write_text("".join(line + "\n" for line in lines))
    return directory


def _record(strategy="bfs-downstream", **fields) -> str:
    return json.dumps(make_record("synthetic_small", strategy, "vulkan", "ok", **fields))


def test_lines_that_are_not_records_are_counted_and_named_once(tmp_path, capsys):
    store = RecordStore(_results(tmp_path / "r", _record(transitions=9), '{"model": "synthetic_small", "strat',
                                 "", '["a list"]', '{"no": "identity"}'))
    assert [r["transitions"] for r in store.read()] == [9]
    assert store.read() and capsys.readouterr().err == (
        f"layoutbench: {store.path}: 3 lines are not records (lines 2, 4, 5); skipped\n")


def test_the_gate_names_the_line_it_skipped_beside_the_record_it_misses(tmp_path, capsys):
    baseline = _results(tmp_path / "b", _record(transitions=9))
    candidate = _results(tmp_path / "c", _record("ilp", transitions=8), _record(transitions=9)[:-1])
    assert cli.main(["gate", "--baseline", str(baseline), "--candidate", str(candidate)]) == 1
    err = capsys.readouterr().err
    assert f"layoutbench: {candidate / 'records.jsonl'}: 1 line is not a record (line 2); skipped\n" in err
    assert "bfs-downstream / vulkan: not in candidate" in err


@pytest.mark.parametrize("command", ["gate", "report"])
def test_a_metric_that_is_not_a_number_is_one_line_naming_file_and_line_exit_2(tmp_path, capsys, command):
    baseline = _results(tmp_path / "b", _record(transitions=9))
    candidate = _results(tmp_path / "c", _record(transitions=9, strategy="x"), _record(transitions="nine"))
    argv = ["gate", "--baseline", str(baseline), "--candidate", str(candidate)] if command == "gate" else [
        "report", str(candidate)]
    assert cli.main(argv) == 2
    assert capsys.readouterr().err == (f"layoutbench: error: {candidate / 'records.jsonl'}:2: transitions is 'nine', "
                                       "not a number; correct or delete that line\n")


# Lines that parse as records but hold a field no reader can use.
UNUSABLE = {
    "a list for a target": lambda record: {**record, "target": ["vulkan"]},
    "a string for the schema version": lambda record: {**record, "schema_version": "2"},
    "a number for a reason": lambda record: {**record, "reason": 3},
}


@pytest.mark.parametrize("command", ["report", "gate"])
@pytest.mark.parametrize("unusable", UNUSABLE)
def test_a_line_with_a_field_no_reader_can_use_is_skipped_and_named_and_kept(tmp_path, capsys, command, unusable):
    baseline = _results(tmp_path / "b", _record(transitions=9), _record("ilp", transitions=8))
    bad = json.dumps(UNUSABLE[unusable](json.loads(_record(transitions=9))))
    candidate = _results(tmp_path / "c", bad, _record("ilp", transitions=8))
    kept = (candidate / "records.jsonl").read_bytes()
    argv = ["gate", "--baseline", str(baseline), "--candidate", str(candidate)] if command == "gate" else [
        "report", str(candidate)]
    assert cli.main(argv) == (1 if command == "gate" else 0)  # the gate misses the record it could not read
    err = capsys.readouterr().err
    assert f"layoutbench: {candidate / 'records.jsonl'}: 1 line is not a record (line 1); skipped\n" in err
    assert "Traceback" not in err
    assert (candidate / "records.jsonl").read_bytes() == kept


def test_a_sweep_into_a_directory_with_unusable_lines_skips_names_and_keeps_them(tmp_path, capsys):
    lines = [json.dumps(UNUSABLE[unusable](json.loads(_record()))) for unusable in
             ("a list for a target", "a string for the schema version")]
    results = _results(tmp_path / "r", *lines)
    assert cli.main(["run", "--models", "synthetic_small", "--strategies", "bfs-downstream", "--out", str(results),
                     "--workers", "0", "--format", "json"]) == 0
    err = capsys.readouterr().err
    assert f"layoutbench: {results / 'records.jsonl'}: 2 lines are not records (lines 1, 2); skipped\n" in err
    assert (results / "records.jsonl").read_text().splitlines()[:2] == lines
    assert [r["status"] for r in RecordStore(results).read()] == ["ok"]


def test_a_disk_that_fills_up_leaves_no_half_record_and_fails_in_one_line(tmp_path, monkeypatch, capsys):
    fail_writes(monkeypatch, tmp_path, errno.ENOSPC, after=1)  # the second record's line
    code = cli.main(["run", "--models", "synthetic_small", "--strategies", "bfs-downstream,dfs-upstream",
                     "--out", str(tmp_path), "--workers", "0", "--format", "json"])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err
    assert err.splitlines()[-1] == (f"layoutbench: failed: cannot write a record to {tmp_path / 'records.jsonl'}: "
                                    "No space left on device; free space and run the command again")
    lines = (tmp_path / "records.jsonl").read_text().splitlines(keepends=True)
    assert [json.loads(line)["strategy"] for line in lines] == ["bfs-downstream"]  # whole, and only it
    assert lines[0].endswith("\n")


@pytest.mark.parametrize("reused", [False, True], ids=["measured", "reused from the record cache"])
def test_a_disk_that_fills_up_as_a_traceback_is_logged_fails_in_one_line(tmp_path, monkeypatch, capsys, reused):
    crashes = ["run", "--models", "synthetic_small", "--strategies", "tests.helpers.user_strategies:Crashes",
               "--workers", "0"]
    if reused:  # the failure, with its traceback, into the record cache
        cli.main([*crashes, "--out", str(tmp_path / "first")])
    out = tmp_path / "second"
    fail_writes(monkeypatch, out / "logs", errno.ENOSPC)
    code = cli.main([*crashes, "--out", str(out), *([] if reused else ["--fresh"])])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err
    assert err.splitlines()[-1].startswith(f"layoutbench: failed: cannot write a traceback to {out / 'logs'}")
    assert err.splitlines()[-1].endswith("No space left on device; free space and run the command again")


def test_a_record_failed_by_a_full_disk_is_measured_again(tmp_path, capsys):
    strategy = "tests.helpers.user_strategies:FindsTheDiskFull"
    for _ in range(2):
        cli.main(["run", "--models", "synthetic_small", "--strategies", strategy, "--out", str(tmp_path),
                  "--workers", "0"])
    failed = RecordStore(tmp_path).read()
    assert [r["status"] for r in failed] == ["failed", "failed"]  # the second run did not reuse the first
    assert "No space left on device" in failed[0]["reason"] and not failed[0]["repeatable"]


def _run_ilp_time(out) -> None:
    """``run`` of ilp-time, which skips it before measuring where no cost table is given."""
    assert cli.main(["run", "--models", "synthetic_small", "--strategies", "ilp-time", "--out", str(out),
                     "--workers", "0"]) == 0


def test_an_unchanged_skip_is_not_written_again(tmp_path, monkeypatch, capsys):
    table = os.environ[COSTS_ENV]
    monkeypatch.delenv(COSTS_ENV)
    for _ in range(3):
        _run_ilp_time(tmp_path)
        assert capsys.readouterr().err.splitlines()[-1].endswith(", 1 skipped before measuring")
    lines = (tmp_path / "records.jsonl").read_text().splitlines()
    assert [json.loads(line)["status"] for line in lines] == ["skipped"]
    monkeypatch.setenv(COSTS_ENV, table)
    _run_ilp_time(tmp_path)
    monkeypatch.delenv(COSTS_ENV)
    _run_ilp_time(tmp_path)  # a skip after another record of it is news: written
    lines = (tmp_path / "records.jsonl").read_text().splitlines()
    assert [json.loads(line)["status"] for line in lines] == ["skipped", "ok", "skipped"]


def test_a_sweep_over_two_targets_takes_the_lock_and_reads_the_records_once(tmp_path, monkeypatch):
    calls = {"writing": 0, "read": 0}
    for method in calls:
        real = getattr(RecordStore, method)

        def counted(self, *args, _real=real, _method=method, **kwargs):
            calls[_method] += 1
            return _real(self, *args, **kwargs)

        monkeypatch.setattr(RecordStore, method, counted)
    no_table = MeasureContext(results_dir=tmp_path.resolve(), costs=None)  # ilp-time skipped on both targets
    sweep = run_sweep(["synthetic_small"], ["ilp-time"], ["vulkan", "vulkan-run"], RecordStore(tmp_path),
                      context=no_table)
    assert [(r["target"], r["status"]) for r in sweep.records] == [("vulkan", "skipped"), ("vulkan-run", "skipped")]
    assert calls == {"writing": 1, "read": 1}


def test_report_on_a_directory_without_records_says_to_run(tmp_path, capsys):
    assert cli.main(["report", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (f"layoutbench: error: no records in '{tmp_path}'; "
                                       f"run layoutbench run --out {tmp_path} first\n")


def test_a_results_directory_keeps_the_layout_earlier_versions_wrote(tmp_path):
    """Every path of a results directory comes from ResultsDir; these are the paths results
    written before it existed use, so those directories still load, profile and import."""
    layout = ResultsDir(tmp_path)
    assert RecordStore(tmp_path).path == layout.records == tmp_path / "records.jsonl"
    assert layout.log("timm:vit", "mod:Cls", "vulkan") == tmp_path / "logs" / "timm_vit--mod_Cls--vulkan.log"
    assert layout.log("m", None, "tosa", ".crash.log") == tmp_path / "logs" / "m--none--tosa.crash.log"
    program = layout.program("a/b", "pkg.mod:Cls")
    assert program == tmp_path / "programs" / "a_b" / "pkg.mod.Cls.pte"
    assert [ResultsDir.beside(program, kind).name for kind in ("node_map", "etdump", "inputs")] == [
        "pkg.mod.Cls.nodes.json", "pkg.mod.Cls.etdump", "pkg.mod.Cls.inputs"]
    assert layout.profile_chart("m", ["a", "x:B"]) == tmp_path / "profile-m-a-vs-x.B.png"
    assert (layout.cost_table, layout.report) == (tmp_path / "costs.json", tmp_path / "report.html")


def _strict(text: str):
    """``text`` read as a strict JSON parser (a browser's, asv's) reads it: no NaN, no Infinity."""
    def refuse(constant: str):
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


# A record whose values include floats that are no number, a metric's and one deep in its context.
MEASURED_AS_NOTHING = make_record("synthetic_small", "bfs-downstream", "vulkan", "ok", transitions=float("nan"),
                                  transition_time_share=float("inf"), environment={"limits": [1.0, float("nan")]})


def test_records_are_strict_json_what_is_no_number_written_as_null(tmp_path):
    store = RecordStore(tmp_path)
    given_back = store.append(MEASURED_AS_NOTHING)
    written = _strict(store.path.read_text())
    assert written == given_back == store.read()[0]
    assert (written["transitions"], written["transition_time_share"], written["environment"]) == (
        None, None, {"limits": [1.0, None]})


def test_command_output_as_json_is_strict(tmp_path):
    import pandas as pd

    from harness.commands.output import render_records
    from harness.inspection.explorer_ids import GRAPH_ID
    from harness.inspection.model_explorer import Overlay, write_overlays
    from harness.results.table import tables_json

    assert _strict(render_records([MEASURED_AS_NOTHING], "json", None))[0]["transitions"] is None
    explained = tables_json({"model": "m", "transitions": pd.DataFrame({"bytes": [float("nan"), 2.0]})})
    assert _strict(explained)["transitions"] == [{"bytes": None}, {"bytes": 2.0}]
    [overlay] = write_overlays(tmp_path, [Overlay("time", "GPU time", {"node": {"value": float("nan")}})])
    assert _strict(overlay.read_text())[GRAPH_ID]["results"] == {"node": {"value": None}}


def test_records_written_with_a_bare_nan_still_read_as_no_value(tmp_path):
    results = _results(tmp_path / "r", _record(transitions=float("nan")))
    assert "NaN" in (results / "records.jsonl").read_text()
    [record] = RecordStore(results).read()
    assert record["transitions"] != record["transitions"]  # NaN: measured as nothing
