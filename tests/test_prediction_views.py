"""``explain``, ``explore`` and ``profile`` say what a table states of a predicted time as the
gate does: its interval, its share outside the table's support with the kernel families
there, and, comparing two programs, that the predicted difference lies in nodes outside the
support exactly when it does; explain's node tables and explore's overlays mark the nodes
outside it. Tables are made by hand: a support of every family of the model but one."""

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from costmodel.features import TRANSITION
from costmodel.intervals import Intervals
from costmodel.per_operator import PerOperatorModel
from costmodel.queries import ANY
from costmodel.support import FEATURES, Support
from costmodel.table import CostTable, save
from harness import cli
from harness.inspection import explain, model_explorer, profile
from harness.inspection.node_facts import NodeFacts
from harness.pipeline.model import pipeline
from harness.results import prediction_trust
from harness.results.results_dir import ResultsDir
from harness.results.table import format_number
from harness.targets.vulkan.compile.prefix import vulkan_lowering
import strategies

MODEL, NAMES = "synthetic_small", ["bfs-downstream", "bfs-refined"]
RELU, CLONE = "relu", "clone:texture_relayout"  # the families the tables leave out
ETVK = Path(__file__).parent / "data" / "etvk"  # runs of synthetic_small's programs on lavapipe
INTERVALS = Intervals.of([-0.1, 0.0, 0.1] * 5, [0.0] * 5, {})


def _table(support: Support | None) -> CostTable:
    """Relus alike in every representation (what two strategies cannot make differ), transitions
    alike too (what they do), nothing else priced."""
    model = PerOperatorModel({("aten.relu.default", ANY, ANY): (0.01, 0.0), (TRANSITION, ANY, ANY): (0.005, 0.0)})
    return CostTable("hand-made", model, support=support, intervals=INTERVALS).identified()


def _support_without(families, left_out: str) -> Support:
    everywhere = {feature: [-1e3, 1e3] for feature in FEATURES}
    return Support({family: everywhere for family in families if family != left_out},
                   {family: 1 for family in families if family != left_out})


@pytest.fixture(scope="module")
def lowered():
    lowering = vulkan_lowering(pipeline(MODEL))
    return [lowering.lower(strategies.get_strategy(name)) for name in NAMES]


@pytest.fixture(scope="module")
def families(lowered) -> set:
    """Every kernel family the programs have: all outside a support that holds none."""
    empty = _table(Support({}, {}))
    return set().union(*(explain.priced_nodes(program, empty)["outside_support"] for program in lowered))


def test_explain_marks_the_nodes_outside_the_support_and_states_the_share_and_interval(lowered, families):
    result = explain.explanation(MODEL, NAMES, lowered, _table(_support_without(families, RELU)))
    for priced in (result["priced_nodes"], result["vs_priced_nodes"]):
        outside = priced.dropna(subset=["outside_support"])
        assert len(outside) and set(outside["outside_support"]) == {RELU}
        assert list(outside["node"]) == list(priced.loc[priced["operator"] == "aten.relu.default", "node"])
    text = explain.render_explanation(result, "table")
    share = result["predicted"]["predicted_outside_support_share"]
    assert 0 < share < 1
    assert f"{NAMES[0]}: predicted " in text and f"; 80 % interval " in text
    assert f"{100 * share:.0f} % outside the table's support ({RELU})" in text
    assert "nodes outside the table's support:" in text
    # Relus are priced alike under both strategies: the difference lies in the transitions, inside.
    assert result["predicted"]["predicted_gpu_ms"] != result["vs_predicted"]["predicted_gpu_ms"]
    assert "difference lies in nodes outside" not in text


def test_explain_says_when_the_difference_lies_in_nodes_outside_the_support(lowered, families):
    result = explain.explanation(MODEL, NAMES, lowered, _table(_support_without(families, CLONE)))
    difference = result["vs_predicted"]["predicted_gpu_ms"] - result["predicted"]["predicted_gpu_ms"]
    assert difference
    line = [line for line in explain.render_explanation(result, "table").splitlines()
            if line.startswith("predicted difference")]
    assert line == [f"predicted difference, {NAMES[1]} less {NAMES[0]}: {difference:+.4g} ms; "
                    f"{prediction_trust.difference_note(result['predicted'], result['vs_predicted'])}"]
    assert "difference lies in nodes outside the table's support" in line[0]
    priced = pd.concat([result["priced_nodes"], result["vs_priced_nodes"]])
    copied = set(priced.loc[priced["operator"] == TRANSITION, ["partition", "node"]].itertuples(index=False))
    differing = result["differing_nodes"]
    marked = differing["outside_support"] == CLONE
    assert marked.any() and list(marked) == [key in copied for key in zip(differing["partition"], differing["node"])]


def test_explain_command_takes_a_cost_table(lowered, families, tmp_path, capsys):
    path = tmp_path / "table.json"
    save(_table(_support_without(families, RELU)), path)
    assert cli.main(["explain", MODEL, "--strategy", NAMES[0], "--costs", str(path)]) == 0
    text = capsys.readouterr().out
    assert f"{NAMES[0]}: predicted " in text and f"outside the table's support ({RELU})" in text
    assert cli.main(["explain", MODEL, "--strategy", NAMES[0], "--costs", str(path), "--format", "json"]) == 0
    stated = json.loads(capsys.readouterr().out)
    assert stated["predicted"]["predicted_outside_support"].keys() == {RELU}
    assert {node["outside_support"] for node in stated["priced_nodes"]} == {RELU, None}


@pytest.mark.parametrize(("base", "cand", "said"), [
    ({"predicted_gpu_ms": 4.0}, {"predicted_gpu_ms": 4.5, "predicted_outside_support": {"a": 0.25}}, True),
    ({"predicted_gpu_ms": 4.5}, {"predicted_gpu_ms": 4.0, "predicted_outside_support": {"a": -0.25}}, True),
    ({"predicted_gpu_ms": 4.0}, {"predicted_gpu_ms": 4.5, "predicted_outside_support": {"a": 0.24}}, False),
    ({"predicted_gpu_ms": 4.0, "predicted_outside_support": {"a": 0.3}},
     {"predicted_gpu_ms": 4.5, "predicted_outside_support": {"a": 0.3}}, False),
    ({"predicted_gpu_ms": 4.0}, {"predicted_gpu_ms": 4.0, "predicted_outside_support": {"a": 0.3}}, False),
])
def test_a_difference_lies_outside_the_support_where_its_outside_time_is_half_of_it(base, cand, said):
    assert (prediction_trust.difference_note(base, cand) is not None) == said


@pytest.mark.parametrize(("share", "said"), [(0.003, "under 1 %"), (0.125, "12 %"), (0.561, "56 %")])
def test_a_share_outside_the_support_never_reads_as_none(share, said):
    note = prediction_trust.outside_note({"predicted_outside_support_share": share,
                                          "predicted_outside_support": {RELU: share}})
    assert note == f"{said} outside the table's support ({RELU})"


def test_explore_overlays_mark_nodes_outside_the_support_and_state_the_programs_prediction():
    facts = {"inside": NodeFacts(predicted_us=5.0, predicted_fitted_us=5.0, predicted_error=0.1),
             "outside": NodeFacts(predicted_us=7.0, predicted_fitted_us=7.0, outside_support={RELU, CLONE}),
             "measured": NodeFacts(predicted_us=1.0)}
    fields = {"predicted_gpu_ms": 0.013, "predicted_gpu_ms_low": 0.011, "predicted_gpu_ms_high": 0.016,
              "predicted_interval_level": 0.8, "predicted_outside_support": {RELU: 0.004, CLONE: 0.003},
              "predicted_outside_support_share": 0.7 / 1.3}
    summary = prediction_trust.predicted_line(fields, "hand-made")
    overlays = {o.slug: o for o in model_explorer.strategy_overlays("s", facts, summary)}
    assert summary == ("predicted 0.013 ms on hand-made; 80 % interval 0.011-0.016 ms; 54 % outside the table's "
                       f"support ({RELU}; {CLONE})")
    assert overlays["s-predicted"].legend.endswith(f"the program {summary}")
    sources = overlays["s-predicted-source"].results
    assert sources["outside"] == {"value": f"fitted outside the table's support ({CLONE}; {RELU})",
                                  "bgColor": model_explorer.OUTSIDE_SUPPORT}
    assert sources["inside"]["value"] == "fitted, ±10 %" and sources["measured"]["bgColor"] == model_explorer.MEASURED


def test_explore_writes_the_marks_and_says_the_programs_prediction(lowered, families, tmp_path, capsys):
    table = tmp_path / "table.json"
    save(_table(_support_without(families, RELU)), table)
    assert cli.main(["explore", MODEL, "--strategy", NAMES[0], "--vs", NAMES[1], "--costs", str(table), "--write-only",
                     "--out", str(tmp_path)]) == 0
    written = capsys.readouterr()
    said = [line for line in written.err.splitlines() if "predicted" in line]
    assert len(said) == 2 and all(f"% outside the table's support ({RELU}); " not in line and
                                  f"% outside the table's support ({RELU})" in line for line in said)
    [source] = [Path(line) for line in written.out.split() if line.endswith(f"{NAMES[0]}-predicted-source.json")]
    marked = {value["value"] for value in json.loads(source.read_text())["forward"]["results"].values()}
    assert f"fitted outside the table's support ({RELU})" in marked


def _profiled(tmp_path, predicted: dict) -> dict:
    """profile's result of bfs-downstream's recorded ETDump (tests/data/etvk) under a record
    that states ``predicted``."""
    program = ResultsDir(tmp_path).program(MODEL, NAMES[0])
    program.parent.mkdir(parents=True)
    for kind in ("etdump", "node_map"):
        shutil.copy(ETVK / f"{NAMES[0]}{ResultsDir.PROGRAM_SUFFIXES[kind]}", ResultsDir.beside(program, kind))
    record = {"strategy": NAMES[0], "status": "ok", "latency_ms_median": 1.0, "latency_ms_p10": 0.9,
              "latency_ms_p90": 1.1, "latency_source": "etdump", "load_ms": 5.0, **predicted}
    return profile.profile_runs(tmp_path, MODEL, NAMES[:1], [record], 3)[0]


@pytest.mark.parametrize(("low", "high", "where"), [(0.9, 1.1, "inside"), (1.05, 1.2, "below"), (0.5, 0.95, "above")])
def test_profile_sets_the_measured_time_against_the_interval_and_names_the_families_outside(tmp_path, low, high, where):
    stated = _profiled(tmp_path, {})["summary"]
    measured = stated["gpu_dispatch_ms"] - stated["staging_gpu_ms"]
    predicted = {"predicted_gpu_ms": measured, "predicted_gpu_ms_low": low * measured,
                 "predicted_gpu_ms_high": high * measured, "predicted_interval_level": 0.8,
                 "predicted_outside_support": {RELU: 0.25 * measured, CLONE: 0.15 * measured},
                 "predicted_outside_support_share": 0.4}
    result = _profiled(tmp_path / "priced", predicted)
    outside = result["outside_support"]
    assert list(outside["family"]) == [RELU, CLONE] and list(outside["share"]) == pytest.approx([0.25, 0.15])
    lines = profile.render_profile(result, "table").splitlines()
    assert lines[1] == (f"{prediction_trust.predicted_line(predicted)}; measured "
                        f"{format_number(measured)} ms, {where} the interval")
    assert f"40 % outside the table's support ({RELU}; {CLONE})" in lines[1]
    assert lines[3] == "predicted time outside the table's support, per kernel family:"
    unpriced = profile.render_profile(_profiled(tmp_path / "unpriced", {}), "table")
    assert "predicted" not in unpriced and "support" not in unpriced
