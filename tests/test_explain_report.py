"""``explain`` (why each transition exists, where two strategies differ), the graph picture,
and the HTML report, the last two opened in headless Chromium."""

import errno
import json

import matplotlib.image
import pytest

import strategies
from harness import cli
from harness.inspection import graph_view
from harness.targets.vulkan.compile import metrics
from harness.inspection.explain import compare_strategies, transitions_table
from harness.results.store import make_record

from .helpers.browser import chromium, screenshot
from .helpers.failing_writes import fail_writes
from harness.pipeline.model import pipeline
from harness.targets.vulkan.compile.prefix import vulkan_lowering


def _json(capsys, argv) -> object:
    assert cli.main(argv) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.slow
def test_explain_mobilevit_dfs_vs_bfs_matches_compare(tmp_path, capsys):
    explained = _json(capsys, ["explain", "mobilevit_xs", "--strategy", "dfs-upstream", "--vs", "bfs-downstream",
                               "--format", "json"])
    compared = _json(capsys, ["compare", "--models", "mobilevit_xs", "--strategies", "dfs-upstream,bfs-downstream",
                              "--out", str(tmp_path), "--format", "json"])
    counts = {r["strategy"]: r["transitions"] for r in compared}
    assert len(explained["transitions"]) == counts["dfs-upstream"]
    assert explained["vs_transitions"] == counts["bfs-downstream"]
    only = explained["transitions_only_in_one"]
    in_dfs = sum(r["only_in"] == "dfs-upstream" for r in only)
    assert in_dfs - (len(only) - in_dfs) == counts["dfs-upstream"] - counts["bfs-downstream"]
    assert explained["differing_nodes"], "the two strategies tag mobilevit_xs differently"


def test_explain_of_the_small_model_matches_compare(tmp_path, capsys):
    """The test above on the small model, bfs-downstream against bfs-refined."""
    names = ("bfs-downstream", "bfs-refined")
    explained = _json(capsys, ["explain", "synthetic_small", "--strategy", names[0], "--vs", names[1],
                               "--format", "json"])
    compared = _json(capsys, ["compare", "--models", "synthetic_small", "--strategies", ",".join(names),
                              "--out", str(tmp_path), "--format", "json", "--workers", "0"])
    counts = {r["strategy"]: r["transitions"] for r in compared}
    assert len(explained["transitions"]) == counts[names[0]] > 0
    assert explained["vs_transitions"] == counts[names[1]]
    only = explained["transitions_only_in_one"]
    in_first = sum(r["only_in"] == names[0] for r in only)
    assert in_first - (len(only) - in_first) == counts[names[0]] - counts[names[1]]


@pytest.mark.slow  # lowers a full-size model, which a slow test lowers first
def test_every_transition_names_its_reader_and_constraint():
    lowered = vulkan_lowering(pipeline("mobilevit_xs.unfused")).lower(strategies.get_strategy("bfs-downstream"))
    table = transitions_table(lowered)
    assert len(table) == len(metrics.transitions(lowered)) == 11
    assert table["consumer"].str.len().gt(0).all() and table["constraint"].str.len().gt(0).all()
    assert table["bytes"].sum() == sum(t.bytes for t in metrics.transitions(lowered))
    # the flip-flop the refinement removes: a linear read channels-packed through a view_copy
    flip = table[table["source"].str.startswith("aten_linear")]
    assert (flip["after"] == "TEXTURE_3D/CHANNELS_PACKED").all() and len(flip) == 2


@pytest.mark.slow  # lowers a full-size model, which a slow test lowers first
def test_forced_transitions_quote_the_accepted_set():
    lowered = vulkan_lowering(pipeline("resnet18")).lower(strategies.get_strategy("all-width-packed"))
    table = transitions_table(lowered)
    forced = table[table["forced"]]
    assert len(forced) > 0
    assert forced["constraint"].str.contains("accepts TEXTURE_3D/{CHANNELS_PACKED}", regex=False).any()
    assert not table["constraint"].str.contains("PACKED_INT8").any(), "float tensors: no int8 layouts quoted"


@pytest.mark.slow  # lowers a full-size model, which a slow test lowers first
def test_differing_nodes_between_bfs_and_refined():
    lowering = vulkan_lowering(pipeline("mobilevit_xs.unfused"))
    bfs, refined = (lowering.lower(strategies.get_strategy(n)) for n in ("bfs-downstream", "bfs-refined"))
    differing, only_one = compare_strategies(bfs, refined, ("bfs-downstream", "bfs-refined"))
    assert set(differing["node"]) == {"aten_view_copy_default_90", "aten_view_copy_default_137"}
    assert (only_one["only_in"] == "bfs-downstream").sum() - (only_one["only_in"] == "bfs-refined").sum() == 11 - 7


def _not_blank(png) -> bool:
    pixels = matplotlib.image.imread(png)
    return pixels.std() > 0.05


@pytest.mark.slow
@pytest.mark.skipif(chromium() is None, reason="Debian chromium is not installed (make system-deps)")
def test_report_and_graph_open_in_headless_chromium(tmp_path, capsys):
    results = tmp_path / "results"
    assert cli.main(["compare", "--models", "synthetic_small,mobilevit_xs.unfused",
                     "--strategies", "bfs-downstream,bfs-refined,ilp", "--out", str(results)]) == 0
    capsys.readouterr()
    assert cli.main(["report", str(results)]) == 0
    report = results / "report.html"
    assert capsys.readouterr().out.strip() == str(report)
    page = report.read_text()
    assert "data:image/svg+xml;base64," in page and "Transitions inserted" in page
    assert "executorch_version" in page and (results / "report.md").exists()
    screenshot(report, results / "report.png")
    assert _not_blank(results / "report.png")

    lowered = vulkan_lowering(pipeline("mobilevit_xs.unfused")).lower(strategies.get_strategy("bfs-downstream"))
    svg = graph_view.write(lowered, "mobilevit_xs.unfused / bfs-downstream", results / "graph.svg")
    text = svg.read_text()
    assert text.count('fill="#d55e00"') + text.count('fill="#D55E00"') >= 11  # one red diamond per transition
    viewer = results / "graph.html"
    viewer.write_text("<html><body style='margin:0'><img src='graph.svg' style='width:100%'></body></html>")
    screenshot(viewer, results / "graph.png")
    assert _not_blank(results / "graph.png")


@pytest.mark.parametrize(
    "argv, message",
    [
        (["report", "/nonexistent/results"], "no records in '/nonexistent/results'"),
        (["explain", "no_such_model", "--strategy", "bfs-downstream"], "unknown model 'no_such_model'"),
        (["explain", "resnet18", "--strategy", "greedy-magic"], "unknown strategy 'greedy-magic'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv, message, capsys):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def _results(directory, *records):
    directory.mkdir()
    (directory / "records.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records))
    return directory


def _two_strategies(directory, transitions=9):
    """A results directory of bfs-downstream and the proven optimum on one model."""
    return _results(directory, make_record("m", "bfs-downstream", "vulkan", "ok", transitions=transitions,
                                           pass_seconds=0.01),
                    make_record("m", "ilp", "vulkan", "ok", transitions=8, optimal=True, pass_seconds=0.05))


@pytest.mark.parametrize("out, message", [
    ("{results}", "{results} is a directory; name the HTML file to write (e.g. --out {results}/report.html)"),
    ("{results}/records.jsonl/x.html", "cannot write the report {results}/records.jsonl/x.html: Not a directory; "
                                       "name another with --out"),
])
def test_a_report_path_that_cannot_be_a_file_is_one_line_and_exit_2(tmp_path, capsys, out, message):
    results = _two_strategies(tmp_path / "r")
    assert cli.main(["report", str(results), "--out", out.format(results=results)]) == 2
    assert capsys.readouterr().err == f"layoutbench: error: {message.format(results=results)}\n"


def test_a_report_into_a_read_only_directory_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    results = _two_strategies(tmp_path / "r")
    fail_writes(monkeypatch, results, errno.EACCES)
    assert cli.main(["report", str(results)]) == 2
    assert capsys.readouterr().err == (f"layoutbench: error: cannot write the report {results / 'report.html'}: "
                                       "Permission denied; name another with --out\n")


def test_a_disk_that_fills_up_fails_the_report_in_one_line_and_keeps_the_last_one_whole(tmp_path, monkeypatch, capsys):
    results = _two_strategies(tmp_path / "r")
    assert cli.main(["report", str(results)]) == 0
    before = {path.name: path.read_bytes() for path in results.rglob("report*") if path.is_file()}
    fail_writes(monkeypatch, results, errno.ENOSPC)
    capsys.readouterr()
    assert cli.main(["report", str(results)]) == 1
    assert capsys.readouterr().err == (f"layoutbench: failed: cannot write the report {results / 'report.html'}: "
                                       "No space left on device; free space and run the command again\n")
    assert {path.name: path.read_bytes() for path in results.rglob("report*") if path.is_file()} == before


@pytest.mark.parametrize("records", [
    [make_record("m", "bfs-downstream", "vulkan", "failed", reason="failed to export"),
     make_record("m", "ilp", "vulkan", "failed", reason="failed to export")],
    [make_record("m", "bfs-downstream", "vulkan", "ok", transitions=None, pass_seconds=0.01),
     make_record("m", "ilp", "vulkan", "ok", transitions=8, optimal=True, pass_seconds=0.05)],
], ids=["every record failed", "a strategy without transitions"])
def test_a_report_of_records_without_the_compared_metrics_is_written(tmp_path, capsys, records):
    results = _results(tmp_path / "r", *records)
    assert cli.main(["report", str(results)]) == 0
    assert capsys.readouterr().out.strip() == str(results / "report.html")
