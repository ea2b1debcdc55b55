"""The regression gate: ``layoutbench compare --baseline DIR --candidate DIR``."""

import json

import pytest

from harness import cli
from harness.results.gate import DEFAULT_THRESHOLDS, GateError, Threshold, judge, parse_thresholds
from harness.results.schema import bad_values
from harness.results.store import RecordStore, make_record
from strategies import _registry
from tests.helpers.user_strategies import ShallowSearch

MODEL = "synthetic_small"


def _compare(out, strategies="bfs-downstream"):
    # --workers 0: measured in this process, where the fixture patches the registry.
    return cli.main(["compare", "--models", MODEL, "--strategies", strategies, "--out", str(out), "--format", "json",
                     "--workers", "0"])


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """Results of the pinned pass, and of a change that makes bfs-downstream insert one more
    transition on synthetic_small (its search budget cut from 64 nodes to 4)."""
    root = tmp_path_factory.mktemp("gate")
    assert _compare(root / "baseline") == 0
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(_registry._strategies, "bfs-downstream", ShallowSearch)
        assert _compare(root / "candidate") == 0
    return root / "baseline", root / "candidate"


def test_gate_fails_on_the_planted_extra_transition(planted, capsys):
    baseline, candidate = planted
    capsys.readouterr()
    assert cli.main(["compare", "--baseline", str(baseline), "--candidate", str(candidate)]) == 1
    out, err = capsys.readouterr()
    assert "transitions" in out and "worse" in out
    assert f"worse: {MODEL} / bfs-downstream / vulkan: transitions 9 -> 10 (threshold 0)" in err
    assert "gate failed: " in err


def test_gate_passes_identical_results_and_loose_thresholds(planted, capsys):
    baseline, candidate = planted
    assert cli.main(["compare", "--baseline", str(baseline), "--candidate", str(baseline)]) == 0
    assert "(no metric changed)" in capsys.readouterr().out
    loose = "transitions=1,transition_bytes=100%,delegate_memory_bytes=100%"
    assert cli.main(["compare", "--baseline", str(baseline), "--candidate", str(candidate),
                     "--threshold", loose]) == 0
    # The fix direction is reported as better, never as a failure.
    capsys.readouterr()
    assert cli.main(["compare", "--baseline", str(candidate), "--candidate", str(baseline)]) == 0
    assert "better" in capsys.readouterr().out


def test_gate_json_rows_carry_deltas(planted, capsys):
    baseline, candidate = planted
    capsys.readouterr()
    assert cli.main(["compare", "--baseline", str(baseline), "--candidate", str(candidate), "--format", "json"]) == 1
    rows = json.loads(capsys.readouterr().out)
    transitions = next(r for r in rows if r["metric"] == "transitions")
    assert (transitions["baseline"], transitions["candidate"], transitions["delta"]) == (9, 10, 1)
    assert transitions["verdict"] == "worse"
    reverse = judge(candidate, baseline, parse_thresholds("transitions=0"))
    assert reverse.set_index("metric").loc["transitions", "verdict"] == "better"


def _write(directory, *records):
    store = RecordStore(directory)
    for record in records:
        store.append(record)
    return directory


def test_a_record_the_candidate_lost_or_failed_fails_the_gate(tmp_path):
    ok = make_record("m", "s", "vulkan", "ok", transitions=3, transition_bytes=100)
    other = make_record("m2", "s", "vulkan", "ok", transitions=1)
    baseline = _write(tmp_path / "b", ok, other)
    candidate = _write(tmp_path / "c", make_record("m", "s", "vulkan", "failed", reason="lowering crashed"),
                       make_record("m3", "s", "vulkan", "ok", transitions=0))
    verdicts = judge(baseline, candidate, parse_thresholds("transitions=0"))
    by_model = verdicts.set_index("model")
    assert by_model.loc["m", "verdict"] == "missing" and "lowering crashed" in by_model.loc["m", "note"]
    assert by_model.loc["m2", "verdict"] == "missing"
    assert by_model.loc["m3", "verdict"] == "new"


def test_relative_and_absolute_thresholds():
    assert Threshold("transition_bytes", 0.05, True).allows(1000, 1050)
    assert not Threshold("transition_bytes", 0.05, True).allows(1000, 1051)
    assert Threshold("transitions", 2, False).allows(3, 5)
    assert not Threshold("transitions", 0, False).allows(3, 4)
    # Throughput is higher-is-better: a drop is what a threshold limits.
    assert not Threshold("inferences_per_second", 0.05, True).allows(100, 90)
    assert Threshold("inferences_per_second", 0.05, True).allows(100, 130)
    parsed = parse_thresholds("transitions=0, transition_bytes=5%")
    assert [(t.metric, t.limit, t.relative) for t in parsed] == [("transitions", 0, False), ("transition_bytes", 0.05, True)]


@pytest.mark.parametrize("unreadable", [float("nan"), None], ids=["nan", "null"])
def test_a_metric_the_candidate_has_no_value_for_fails_the_gate_in_one_line_per_record(tmp_path, capsys, unreadable):
    """A bare NaN as records were written before they were strict JSON, or a null."""
    baseline = _write(tmp_path / "b", make_record("m", "s", "vulkan", "ok", transitions=9, transition_bytes=100),
                      make_record("m2", "s", "vulkan", "ok", transitions=3))
    candidate = tmp_path / "c"
    _lines(candidate, make_record("m", "s", "vulkan", "ok", transitions=unreadable, transition_bytes=100),
           make_record("m2", "s", "vulkan", "ok", transitions=3))
    assert cli.main(["gate", "--baseline", str(baseline), "--candidate", str(candidate)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert [line for line in err if "missing" in line] == [
        "layoutbench: missing: m / s / vulkan: transitions 9 in the baseline, no value in the candidate: cannot compare"]
    assert err[-1].startswith("layoutbench: gate failed: 1 regressions")


@pytest.mark.parametrize(
    "text, message",
    [
        ("transitons=0", "unknown metric 'transitons' in --threshold; known: transitions"),
        ("transitions=lots", "threshold of transitions must be a number or a percentage, not 'lots'"),
        ("transitions=nan", "threshold of transitions must be a number or a percentage, not 'nan'"),
        ("transitions=inf", "threshold of transitions must be a number or a percentage, not 'inf'"),
        ("transition_bytes=nan%", "threshold of transition_bytes must be a number or a percentage, not 'nan%'"),
        ("transitions=-1", "must not be negative"),
        ("transitions=-inf", "must be a number or a percentage, not '-inf'"),
        ("", "--threshold names no metric"),
    ],
)
def test_bad_thresholds_are_one_line_errors(text, message):
    with pytest.raises(GateError, match=message.replace("(", r"\(")):
        parse_thresholds(text)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--baseline", "{tmp}"], "--baseline and --candidate go together"),
        (["--baseline", "{tmp}", "--candidate", "{tmp}", "--models", "resnet18"], "drop --models/--zoo"),
        ([], "say what to run (--models or --zoo), or what to judge"),
        (["--baseline", "{tmp}/none", "--candidate", "{tmp}"],
         "has no records.jsonl; write it with layoutbench run --out"),
        (["--baseline", "{tmp}", "--candidate", "{tmp}", "--threshold", "transitions=nan"],
         "threshold of transitions must be a number or a percentage, not 'nan'"),
    ],
)
def test_gate_usage_errors_exit_2(tmp_path, capsys, args, message):
    argv = ["compare", *(a.format(tmp=tmp_path) for a in args)]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


def test_default_thresholds_gate_arm_records_too(tmp_path):
    arm = dict(model="resnet18", strategy=None, target="ethos-u55-128")
    baseline = _write(tmp_path / "b", make_record(**arm, status="ok", transposes=1, cycles=20.39e6))
    candidate = _write(tmp_path / "c", make_record(**arm, status="ok", transposes=3, cycles=20.40e6))
    verdicts = judge(baseline, candidate, parse_thresholds(DEFAULT_THRESHOLDS)).set_index("metric")
    assert verdicts.loc["transposes", "verdict"] == "worse"
    assert verdicts.loc["cycles", "verdict"] == "ok"  # +0.05 %, inside 5 %


def test_default_thresholds_gate_latency_only_where_the_runtime_s_events_timed_it(tmp_path):
    """5 % on the median of Method::execute (about 2 % between runs on an H100); a wall-clock
    latency in the baseline is not compared, and one in the candidate cannot be: a failure."""
    def run(model, latency, source):
        return make_record(model, "s", "vulkan-run", "ok", latency_ms_median=latency, latency_source=source)

    baseline = _write(tmp_path / "b", run("slower", 5.26, "etdump"), run("steady", 5.26, "etdump"),
                      run("wall", 3.94, "wall-clock"), run("mixed", 5.26, "etdump"))
    candidate = _write(tmp_path / "c", run("slower", 5.60, "etdump"), run("steady", 5.37, "etdump"),
                       run("wall", 7.26, "wall-clock"), run("mixed", 7.26, "wall-clock"))
    verdicts = judge(baseline, candidate, parse_thresholds(DEFAULT_THRESHOLDS))
    latency = verdicts[verdicts["metric"] == "latency_ms_median"].set_index("model")
    assert latency["verdict"].to_dict() == {"slower": "worse", "steady": "ok", "mixed": "missing"}
    assert latency.loc["mixed", "note"] == ("latency_ms_median 5.26 in the baseline, latency_source 'wall-clock' "
                                            "(not 'etdump') in the candidate: cannot compare")


def test_a_gate_on_a_mostly_fitted_prediction_says_so(tmp_path, capsys):
    """A predicted time mostly priced by the fit, not from nodes measured on the model, is
    gated all the same, and the verdict says how far to trust it: its interval, and its share
    outside the table's support."""
    def predicted(model, ms, share, outside=None):
        interval = {"predicted_gpu_ms_low": ms * 0.9, "predicted_gpu_ms_high": ms * 1.2, "predicted_interval_level": 0.8}
        return make_record(model, "s", "vulkan", "ok", predicted_gpu_ms=ms, predicted_measured_share=share,
                           **(interval if share < 0.5 else {}), predicted_outside_support=outside or {},
                           predicted_outside_support_share=sum((outside or {}).values()) / ms)

    baseline = _write(tmp_path / "b", predicted("fitted", 4.0, 0.1), predicted("measured", 4.0, 0.9))
    candidate = _write(tmp_path / "c", predicted("fitted", 4.2, 0.1, {"conv2d:grouped": 0.4, "softmax:other_dim": 0.1}),
                       predicted("measured", 4.2, 0.9))
    rows = judge(baseline, candidate, parse_thresholds("predicted_gpu_ms=1%")).set_index("model")
    assert rows["verdict"].to_dict() == {"fitted": "worse", "measured": "worse"}
    assert rows.loc["fitted", "note"] == ("mostly fitted: 10 % measured on this model; 80 % interval 3.78-5.04 ms; "
                                          "12 % outside the table's support (conv2d:grouped; softmax:other_dim); "
                                          "0.5 of the 0.2 ms difference lies in nodes outside the table's support")
    assert not isinstance(rows.loc["measured", "note"], str)
    assert cli.main(["gate", "--baseline", str(baseline), "--candidate", str(candidate),
                     "--threshold", "predicted_gpu_ms=1%"]) == 1
    err = capsys.readouterr().err
    assert "fitted / s / vulkan: predicted_gpu_ms 4 -> 4.2 (threshold 1%); mostly fitted: 10 % measured" in err


@pytest.mark.parametrize("unreadable", [float("nan"), None], ids=["nan", "null"])
def test_a_metric_the_baseline_has_no_value_for_fails_the_gate_in_one_line(tmp_path, capsys, unreadable):
    """Measured as nothing in the baseline (null, or a bare NaN as records were written before) is
    no pass; a metric the baseline does not hold at all (an earlier schema, another target) is
    not compared."""
    baseline = tmp_path / "b"
    _lines(baseline, make_record("m", "s", "vulkan", "ok", transitions=unreadable),
           make_record("m2", "s", "vulkan", "ok", transitions=3))
    candidate = _write(tmp_path / "c", make_record("m", "s", "vulkan", "ok", transitions=1000),
                       make_record("m2", "s", "vulkan", "ok", transitions=3, transition_bytes=100))
    assert cli.main(["gate", "--baseline", str(baseline), "--candidate", str(candidate)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert [line for line in err if "missing" in line] == [
        "layoutbench: missing: m / s / vulkan: transitions 1,000 in the candidate, no value in the baseline: "
        "cannot compare"]
    assert err[-1].startswith("layoutbench: gate failed: 1 regressions")


# Values no count or size can have, each as a candidate's transitions (or bytes): what the gate says.
IMPOSSIBLE = {
    "negative count": ({"transitions": -1}, "transitions is -1, negative, which a count never is"),
    "negative size": ({"transition_bytes": -30720}, "transition_bytes is -30720, negative, which a size never is"),
    "boolean": ({"transitions": True}, "transitions is True, not a number"),
    "a string": ({"transitions": "nine"}, "transitions is 'nine', not a number"),
    "beyond a float": ({"transitions": 10 ** 400}, "transitions is an integer of 401 digits, beyond a float"),
    "negative time": ({"predicted_gpu_ms": -2.0}, "predicted_gpu_ms is -2.0, negative, which a time never is"),
    "infinite time": ({"latency_ms_median": float("inf")}, "latency_ms_median is inf, not a finite number"),
    "infinite count": ({"transitions": float("-inf")}, "transitions is -inf, not a finite number"),
    "newer schema": ({"schema_version": 99}, "schema_version is 99, written by a newer layoutbench (this one "
                                             "reads up to 2): read it with that version"),
}


def _lines(directory, *records) -> None:
    directory.mkdir()
    (directory / "records.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records))


@pytest.mark.parametrize("impossible", IMPOSSIBLE)
@pytest.mark.parametrize("command", ["gate", "report", "run"])
def test_an_impossible_value_is_one_line_naming_file_and_line_exit_2(tmp_path, capsys, impossible, command):
    fields, problem = IMPOSSIBLE[impossible]
    good = make_record(MODEL, "bfs-downstream", "vulkan", "ok", transitions=9, transition_bytes=30720)
    _lines(tmp_path / "b", good)
    _lines(tmp_path / "c", good, {**good, **fields})
    argv = {"gate": ["gate", "--baseline", str(tmp_path / "b"), "--candidate", str(tmp_path / "c")],
            "report": ["report", str(tmp_path / "c")],
            "run": ["run", "--models", MODEL, "--strategies", "bfs-downstream", "--out", str(tmp_path / "c")]}
    assert cli.main(argv[command]) == 2
    assert capsys.readouterr().err == (f"layoutbench: error: {tmp_path / 'c' / 'records.jsonl'}:2: {problem}; "
                                       "correct or delete that line\n")


def test_every_impossible_record_of_both_files_gets_its_line(tmp_path, capsys):
    good = make_record(MODEL, "s", "vulkan", "ok", transitions=9)
    _lines(tmp_path / "b", good, {**good, "strategy": "t", "transitions": "many"})
    _lines(tmp_path / "c", {**good, "transitions": -1}, good, {**good, "strategy": "t", "transitions": True})
    assert cli.main(["gate", "--baseline", str(tmp_path / "b"), "--candidate", str(tmp_path / "c")]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"layoutbench: error: {tmp_path / 'b' / 'records.jsonl'}:2: transitions is 'many', not a number; "
        "correct or delete that line",
        f"layoutbench: error: {tmp_path / 'c' / 'records.jsonl'}:1: transitions is -1, negative, which a count "
        "never is; correct or delete that line",
        f"layoutbench: error: {tmp_path / 'c' / 'records.jsonl'}:3: transitions is True, not a number; "
        "correct or delete that line"]


@pytest.mark.parametrize("side", ["baseline", "candidate"])
def test_a_negative_time_on_either_side_is_refused_not_an_improvement(tmp_path, capsys, side):
    """-2 ms against 2 ms is no 200 % gain: no time is negative."""
    records = {"baseline": 2.0, "candidate": 2.0, side: -2.0}
    for role, ms in records.items():
        _lines(tmp_path / role, make_record(MODEL, "s", "vulkan", "ok", predicted_gpu_ms=ms))
    assert cli.main(["gate", "--baseline", str(tmp_path / "baseline"), "--candidate", str(tmp_path / "candidate"),
                     "--threshold", "predicted_gpu_ms=1%"]) == 2
    assert capsys.readouterr().err == (f"layoutbench: error: {tmp_path / side / 'records.jsonl'}:1: predicted_gpu_ms "
                                       "is -2.0, negative, which a time never is; correct or delete that line\n")


def test_a_boolean_metric_may_be_a_boolean():
    assert bad_values(make_record(MODEL, "ilp", "vulkan", "ok", optimal=True, top1_match=False)) == []


def test_an_ilp_objective_may_be_negative():
    """A calibration round maximises what it covers: its objective and bound are negative."""
    assert bad_values(make_record(MODEL, "calibration-2", "vulkan", "ok", objective=-45.0, bound=-45.0000009)) == []


def _gate(baseline, candidate, *options) -> int:
    return cli.main(["gate", "--baseline", str(baseline), "--candidate", str(candidate), *options])


def test_a_baseline_with_no_ok_record_compares_nothing_and_does_not_pass(tmp_path, capsys):
    """One skipped record and a line cut short: nothing to judge the candidate's ok record by."""
    _lines(tmp_path / "b", make_record("m", "s", "vulkan", "skipped", reason="no Vulkan runtime"))
    with (tmp_path / "b" / "records.jsonl").open("a") as records:
        records.write('{"model": "m", "strat')
    candidate = _write(tmp_path / "c", make_record("m", "s", "vulkan", "ok", transitions=3))
    assert _gate(tmp_path / "b", candidate) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"layoutbench: {tmp_path / 'b' / 'records.jsonl'}: 1 line is not a record (line 2); skipped",
        "layoutbench: error: the gate compared nothing: m / s / vulkan: baseline skipped: no Vulkan runtime; measure "
        "the baseline where these records can be ok, or gate metrics its records hold (--threshold)"]


def test_thresholds_no_baseline_record_holds_compare_nothing(tmp_path, capsys):
    arm = make_record("resnet18", None, "ethos-u55-128", "ok", transposes=1)
    assert _gate(_write(tmp_path / "b", arm), _write(tmp_path / "c", arm), "--threshold", "transitions=0") == 2
    assert capsys.readouterr().err == (
        "layoutbench: error: the gate compared nothing: resnet18 / - / ethos-u55-128: no gated metric of the "
        "baseline record has a value the gate can compare; measure the baseline where these records can be ok, or "
        "gate metrics its records hold (--threshold)\n")


def test_the_records_a_gate_did_not_compare_are_named_each(tmp_path, capsys):
    """Where some records are compared and some are not, the gate judges those it compared and
    names each of the others with why."""
    compared = make_record("m1", "s", "vulkan", "ok", transitions=3)
    skipped = make_record("m2", "s", "vulkan-run", "skipped", reason="no Vulkan runtime")
    wall_clock = make_record("m3", "s", "vulkan-run", "ok", latency_ms_median=4.0, latency_source="wall-clock")
    baseline = _write(tmp_path / "b", compared, skipped, wall_clock)
    candidate = _write(tmp_path / "c", compared, skipped, wall_clock)
    assert _gate(baseline, candidate) == 0
    err = capsys.readouterr().err.splitlines()
    assert [line for line in err if "not compared:" in line] == [
        "layoutbench: not compared: m2 / s / vulkan-run: baseline skipped: no Vulkan runtime; candidate skipped: "
        "no Vulkan runtime",
        "layoutbench: not compared: m3 / s / vulkan-run: no gated metric of the baseline record has a value the gate "
        "can compare"]
    assert err[-1] == f"layoutbench: gate passed ({candidate} vs {baseline}; 2 records not compared)"


# Records of one identity measured where their values cannot be compared: (field, the baseline's
# value, the candidate's, the metric gated, how the gate says they differ).
INCOMPARABLE = {
    "device": ("environment", {"vulkan_device": "llvmpipe (LLVM 15.0.6, 256 bits)"},
               {"vulkan_device": "NVIDIA H100 80GB HBM3"}, "latency_ms_median",
               "on different Vulkan devices ('llvmpipe (LLVM 15.0.6, 256 bits)' vs 'NVIDIA H100 80GB HBM3')"),
    "precision": ("precision", "float32", "float16", "transitions", "in different precisions ('float32' vs 'float16')"),
    "cost table": ("environment", {"gpu_costs": "lavapipe:1f2e"}, {"gpu_costs": "NVIDIA H100:9c0d"},
                   "predicted_gpu_ms", "by different cost tables ('lavapipe:1f2e' vs 'NVIDIA H100:9c0d')"),
}


@pytest.mark.parametrize("basis", INCOMPARABLE)
def test_values_measured_on_different_devices_are_refused_unless_asked(tmp_path, capsys, basis):
    field, before, after, metric, how = INCOMPARABLE[basis]
    threshold = f"{metric}=0"

    def measured(value, more):
        return make_record("m", "s", "vulkan-run", "ok", transitions=9 + more, latency_ms_median=17.42 + more,
                           latency_source="etdump", predicted_gpu_ms=4.2 + more, **{field: value})

    baseline, candidate = _write(tmp_path / "b", measured(before, 0)), _write(tmp_path / "c", measured(after, 1))
    assert _gate(baseline, candidate, "--threshold", threshold) == 2
    assert capsys.readouterr().err == (
        f"layoutbench: error: the baseline and the candidate were measured {how}: m / s / vulkan-run {metric}: their "
        "values are not comparable; "
        "gate results of one device, precision and cost table, or pass --allow-incomparable to compare them all the "
        "same\n")
    assert _gate(baseline, candidate, "--threshold", threshold, "--allow-incomparable", "--format", "json") == 1
    captured = capsys.readouterr()
    [row] = json.loads(captured.out)
    assert (row["metric"], row["verdict"]) == (metric, "worse")
    assert row["note"] == f"measured {how}: compared by --allow-incomparable"
    assert captured.err.splitlines()[-1].endswith(
        "; 1 values measured on different devices, precisions or cost tables, compared by --allow-incomparable)")


def test_what_a_device_does_not_change_is_compared_across_devices(tmp_path):
    """A count of the lowering is the same on any device: gated whatever device ran the program."""
    def run(device, transitions):
        return make_record("m", "s", "vulkan-run", "ok", transitions=transitions, environment={"vulkan_device": device})

    baseline, candidate = _write(tmp_path / "b", run("llvmpipe", 9)), _write(tmp_path / "c", run("NVIDIA H100", 10))
    verdicts = judge(baseline, candidate, parse_thresholds("transitions=0"))
    assert verdicts.set_index("metric").loc["transitions", "verdict"] == "worse"


def test_the_gate_s_help_names_the_flag_that_compares_across_devices(capsys):
    with pytest.raises(SystemExit):
        cli.main(["gate", "--help"])
    assert "--allow-incomparable" in capsys.readouterr().out
