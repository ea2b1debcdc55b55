"""The report of a sweep with time: each strategy against bfs-downstream in per cent per model,
measured time beside its prediction and the prediction's trust, units on every axis, human
units in the tables; opened in headless Chromium. The records are made here by hand (a run
on a GPU is not needed to draw one)."""

import base64
import re

import matplotlib.image
import pandas as pd
import pytest

from harness.results import relative, report
from harness.results.frames import load, with_derived
from harness.results.store import RecordStore, make_record

from .helpers.browser import chromium, rendered_dom, screenshot

MIB, KIB = 2**20, 2**10
FIELDS = ("predicted_gpu_ms", "gpu_dispatch_ms", "staging_gpu_ms", "latency_ms_median", "transitions",
          "delegate_memory_bytes", "predicted_measured_share", "predicted_gpu_ms_low", "predicted_gpu_ms_high",
          "predicted_outside_support_share")
# model -> strategy -> FIELDS: measured GPU time is dispatches less staging (m1: 2.0, 1.9, 1.7 ms)
RUNS = {
    "m1": {"bfs-downstream": (2.0, 2.2, 0.2, 3.0, 10, 4 * MIB, 1.0, 1.9, 2.2, 0.0),
           "bfs-refined": (1.9, 2.1, 0.2, 2.9, 8, 4 * MIB, 1.0, 1.8, 2.1, 0.0),
           "ilp-time": (1.6, 1.9, 0.2, 2.7, 12, 3.5 * MIB, 0.8, 1.5, 1.8, 0.03)},
    "m2": {"bfs-downstream": (1.0, 1.1, 0.1, 1.5, 0, 512 * KIB, 0.5, 0.8, 1.4, 0.1),
           "bfs-refined": (1.0, 1.1, 0.1, 1.5, 0, 512 * KIB, 0.5, 0.8, 1.4, 0.1),
           "ilp-time": (0.9, 1.0, 0.1, 1.4, 2, 520 * KIB, 0.4, 0.7, 1.3, 0.1)},
}


def _records(directory) -> None:
    store = RecordStore(directory)
    for model, runs in RUNS.items():
        for strategy, values in runs.items():
            fields = dict(zip(FIELDS, values))
            fields["prediction_error"] = fields["predicted_gpu_ms"] / (
                fields["gpu_dispatch_ms"] - fields["staging_gpu_ms"]) - 1
            store.append(make_record(model, strategy, "vulkan-run", "ok", **fields))
            # records of a table that said nothing of its trust, never run
            store.append(make_record(model, strategy, "vulkan", "ok", predicted_gpu_ms=fields["predicted_gpu_ms"],
                                     transitions=fields["transitions"]))
    store.append(make_record("m1", None, "tosa", "ok", transposes=4, latency_ms_median=12.5))
    store.append(make_record("m3", "ilp-time", "vulkan-run", "failed", "the runtime has no shader conv2d_dw_x"))


def test_changes_are_relative_to_bfs_downstream_per_model(tmp_path):
    _records(tmp_path)
    records = with_derived(load(tmp_path))
    run = records[records["target"] == "vulkan-run"]
    predicted = relative.changes(run, "predicted_gpu_ms")
    assert list(predicted.columns) == ["bfs-refined", "ilp-time"]  # the baseline is 0 by definition
    assert predicted.loc["m1", "ilp-time"] == pytest.approx(-0.20)
    assert predicted.loc["m2", "bfs-refined"] == 0
    assert relative.changes(run, "measured_gpu_ms").loc["m1", "ilp-time"] == pytest.approx((1.7 - 2.0) / 2.0)
    transitions = relative.changes(run, "transitions")
    assert transitions.loc["m1", "ilp-time"] == pytest.approx(0.2)
    assert transitions.loc["m2", "ilp-time"] == float("inf") and transitions.loc["m2", "bfs-refined"] == 0
    tally = relative.tally(transitions).set_index("strategy")
    assert tally.loc["ilp-time", ["lower on", "equal on", "higher on"]].tolist() == [0, 0, 2]
    assert tally.loc["bfs-refined", ["lower on", "equal on", "higher on", "lowest on"]].tolist() == [1, 1, 0, "m1"]
    assert tally.loc["bfs-refined", "highest"] == 0 and pd.isna(tally.loc["bfs-refined", "highest on"])
    assert tally.loc["ilp-time", "lowest on"] == "m1"  # +20 %: the lowest, if no drop


def _charts(page: str) -> dict[str, str]:
    """The page's charts: caption -> SVG text."""
    found = re.findall(r"<figcaption>([^<]*)</figcaption><img alt='[^']*' src='data:image/svg\+xml;base64,([^']+)'>",
                       page)
    return {caption: base64.b64decode(data).decode() for caption, data in found}


def _texts(svg: str) -> list[str]:
    return [re.sub(r"<[^>]+>", "", text).strip() for text in re.findall(r"<text\b.*?</text>", svg, re.S)]


def _section(markdown: str, target: str) -> str:
    return markdown.split(f"## Target {target}\n")[1].split("\n## ")[0]


def _table(section: str, caption: str) -> dict[tuple[str, str], dict[str, str]]:
    """A Markdown table of the report: (model, strategy) -> column -> cell."""
    lines = section.split(f"### {caption}\n\n")[1].split("\n\n")[0].splitlines()
    header, *rows = ([cell.strip() for cell in line.strip("|").split("|")] for line in lines if "---" not in line)
    return {tuple(row[:2]): dict(zip(header[2:], row[2:])) for row in rows}


def test_report_shows_time_against_bfs_downstream_with_units(tmp_path):
    _records(tmp_path)
    stale = tmp_path / "report_charts" / "vulkan_transitions.png"  # an earlier report's chart
    stale.parent.mkdir()
    stale.write_bytes(b"")
    page = report.write_report(tmp_path).read_text()
    assert not stale.exists()
    charts = _charts(page)
    per_model = charts["Change relative to bfs-downstream per model (vulkan-run)"]
    texts = _texts(per_model)
    assert texts.count("change vs bfs-downstream (%)") == 5  # predicted, measured, latency, transitions, memory
    assert {"m1", "m2", "from 0"} <= set(texts)
    assert "Predicted GPU time of one inference (cost table)" in " ".join(" ".join(texts).split())  # wrapped
    scatter = _texts(charts["Measured against predicted change (vulkan-run)"])
    assert {"predicted GPU time: change vs bfs-downstream (%)", "measured GPU time: change vs bfs-downstream (%)"
            } <= set(scatter)
    assert "Median latency of one inference (ms)" in _texts(charts["Median latency of one inference (tosa)"])
    assert "TRANSPOSEs left in the TOSA graph (count)" in _texts(charts["TRANSPOSEs left in the TOSA graph (tosa)"])

    markdown = (tmp_path / "report.md").read_text()
    run = _section(markdown, "vulkan-run")
    rows = _table(run, "Per model and strategy")
    assert rows[("m1", "ilp-time")] == {
        "pred gpu": "1.6 ms", "pred gpu change": "-20 %", "measured gpu": "1.7 ms", "measured gpu change": "-15 %",
        "prediction error": "-5.88 %", "measured share": "80 %", "pred low": "1.5 ms",
        "pred high": "1.8 ms", "outside support": "3 %",
        "latency": "2.7 ms", "latency change": "-10 %", "transitions": "12", "transitions change": "+20 %",
        "memory": "3.5 MiB", "memory change": "-12.5 %"}
    assert rows[("m2", "ilp-time")]["transitions change"] == "from 0"
    assert rows[("m2", "bfs-downstream")]["memory"] == "512 KiB" and rows[("m2", "bfs-downstream")][
        "memory change"] == "-"
    assert "measured share" not in _section(markdown, "vulkan")  # older records: no trust to show
    assert "GPU time is predicted only" in _section(markdown, "vulkan")
    assert "the runtime has no shader conv2d_dw_x" in run and "Where ilp-time is above" not in markdown
    assert all(f"report_charts/{name}" in markdown for name in (
        "vulkan-run_change_per_model.svg", "vulkan-run_predicted_vs_measured.svg"))
    assert (tmp_path / "report_charts" / "vulkan-run_change_per_model.svg").read_text() == per_model


# Clicks the heading "memory" of the table per model of vulkan-run once, then writes the column's cells.
SORT_BY_MEMORY = """<script>
var table = Array.from(document.querySelectorAll("table.sortable")).find(t => t.textContent.includes("measured share"));
var headings = Array.from(table.querySelectorAll("thead th"));
var column = headings.findIndex(th => th.textContent.trim() === "memory");
headings[column].click();
var cells = Array.from(table.tBodies[0].rows).map(row => row.cells[column].textContent.trim());
document.body.insertAdjacentHTML("beforeend", "<pre id='sorted'>" + cells.join("|") + "</pre>");
</script></body>"""


@pytest.mark.skipif(chromium() is None, reason="Debian chromium is not installed (make system-deps)")
def test_report_with_time_opens_in_headless_chromium_and_sorts_by_value(tmp_path):
    _records(tmp_path)
    html = report.write_report(tmp_path)
    screenshot(html, tmp_path / "report.png")
    assert matplotlib.image.imread(tmp_path / "report.png").std() > 0.05
    clicked = tmp_path / "clicked.html"
    clicked.write_text(html.read_text().replace("</body>", SORT_BY_MEMORY))
    cells = re.search(r"<pre id=\"sorted\">([^<]*)</pre>", rendered_dom(clicked)).group(1).split("|")
    assert cells == ["512 KiB", "512 KiB", "520 KiB", "3.5 MiB", "4 MiB", "4 MiB"]  # by bytes, not by the digits
