"""A self-contained HTML report (and Markdown beside it) of a results directory.

What is charted and tabled comes from the metric schema. Tables are pandas pivots of the
latest records (model x strategy, per target), sortable by any column in the HTML; charts
are matplotlib bar charts of at most :data:`TOP_N` models (those with the largest values),
embedded in the HTML as PNG data and written next to the Markdown. Each target whose
records have strategies starts with a summary (:mod:`harness.results.summary`): how far the
models got, each strategy against the optimum, the extremes, the commonest failures.
"""

import base64
import html
import io
from datetime import datetime, timezone
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display: render to files
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from harness.results import summary  # noqa: E402
from harness.results.schema import METRICS  # noqa: E402
from harness.results.frames import load, with_excess  # noqa: E402
from harness.results.results_dir import ResultsDir  # noqa: E402
from harness.results.table import format_number  # noqa: E402
from layoutkit.reference_strategies import OPTIMUM_STRATEGY  # noqa: E402
from layoutkit.errors import UsageError, write_error  # noqa: E402

ENVIRONMENT = ("layoutbench_commit", "torch_version", "executorch_version", "timm_version",
               "python_version", "machine", "cpu")

STYLE = """
body { font-family: Helvetica, Arial, sans-serif; margin: 2em; color: #222; max-width: 1400px; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: right; }
th { background: #f2f2f2; }
img { max-width: 100%; border: 1px solid #eee; margin-bottom: 1em; }
table.sortable th { cursor: pointer; }
"""
TOP_N = 30

# Click a heading to sort by that column (numbers as numbers); no library, works offline.
SORT_SCRIPT = """
document.querySelectorAll("table.sortable").forEach(function (table) {
  table.querySelectorAll("thead th").forEach(function (heading, column) {
    heading.addEventListener("click", function () {
      var body = table.tBodies[0], rows = Array.from(body.rows), up = heading.dataset.order !== "up";
      var value = function (row) {
        var text = row.cells[column] ? row.cells[column].textContent.trim() : "";
        var number = parseFloat(text.replace(/,/g, ""));
        return isNaN(number) ? text : number;
      };
      rows.sort(function (a, b) {
        var x = value(a), y = value(b);
        var order = (typeof x === typeof y) ? (x < y ? -1 : x > y ? 1 : 0) : (typeof x === "number" ? -1 : 1);
        return up ? order : -order;
      });
      heading.dataset.order = up ? "up" : "down";
      rows.forEach(function (row) { body.appendChild(row); });
    });
  });
});
"""


def _pivot(frame: pd.DataFrame, metric: str) -> pd.DataFrame:
    ok = frame[frame["status"] == "ok"]
    return ok.pivot_table(index="model", columns="strategy", values=metric, aggfunc="first")


def largest(table: pd.DataFrame, title: str) -> tuple[pd.DataFrame, str]:
    """At most TOP_N rows of a model x strategy table (those with the largest values), and a
    title that says so."""
    if len(table) <= TOP_N:
        return table, title
    return table.loc[table.max(axis=1).nlargest(TOP_N).index], f"{title}: the {TOP_N} largest of {len(table)} models"


def _chart(frame: pd.DataFrame, metric: str, title: str) -> bytes:
    table, title = largest(_pivot(frame, metric), title)
    figure, axes = plt.subplots(figsize=(max(6.0, 0.9 * len(table) + 3), 4.2))
    table.plot.bar(ax=axes, width=0.8)
    axes.set_title(title)
    axes.set_xlabel("")
    axes.tick_params(axis="x", labelrotation=30)
    plt.setp(axes.get_xticklabels(), ha="right")
    axes.legend(title="strategy", fontsize=8)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    plt.close(figure)
    return buffer.getvalue()


def _html(table: pd.DataFrame, index: bool = True) -> str:
    return table.to_html(float_format=format_number, na_rep="-", index=index, classes="sortable")


def _summary(records: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """The summary tables of one target's records."""
    tables = [("How far the models got", summary.stages(records).to_frame()),
              ("Strategies on the models every strategy measured", summary.per_strategy(records))]
    for strategy in sorted(set(summary.comparable(records)["strategy"]) - {OPTIMUM_STRATEGY}):
        tables.append((f"Where {strategy} is above the proven optimum", summary.above_optimum(records, strategy)))
    tables += [("Extremes", summary.extremes(records).set_index("what")),
               ("Commonest failures", summary.failure_reasons(records))]
    return tables


def _has(frame: pd.DataFrame, metric: str) -> bool:
    return metric in frame.columns and frame.loc[frame["status"] == "ok", metric].notna().any()


def write_report(results: str | Path, out: str | Path | None = None) -> Path:
    """Write ``report.html`` (self-contained) and ``report.md`` (+ PNG charts); returns the HTML path."""
    results = Path(results)
    frame = load(results) if results.is_dir() else pd.DataFrame()
    if frame.empty:
        raise UsageError(f"no records in '{results}'; run layoutbench run --out {results} first")
    frame = with_excess(frame)
    html_path = Path(out) if out else ResultsDir(results).report
    if html_path.is_dir():
        raise UsageError(f"{html_path} is a directory; name the HTML file to write (e.g. --out "
                         f"{html_path / 'report.html'})")
    charts_dir = html_path.with_name(html_path.stem + "_charts")
    charts: dict[str, bytes] = {}

    title = f"layoutbench report: {results.resolve().name}"
    body, markdown = [f"<h1>{html.escape(title)}</h1>"], [f"# {title}", ""]
    status = frame.groupby(["target", "status"]).size().unstack(fill_value=0)
    body += ["<h2>Records</h2>", status.to_html()]
    markdown += ["## Records", "", status.to_markdown(), ""]

    for target, records in frame.groupby("target"):
        body.append(f"<h2>Target <code>{html.escape(target)}</code></h2>")
        markdown += [f"## Target `{target}`", ""]
        if records["strategy"].ne("-").any():
            for caption, table in _summary(records):
                body += [f"<h3>{html.escape(caption)}</h3>", _html(table) if len(table) else "<p>none</p>"]
                markdown += [f"### {caption}", "", table.to_markdown(floatfmt=".4g") if len(table) else "none", ""]
        for metric, caption in ((m.name, m.label) for m in METRICS.values() if m.chart):
            if not _has(records, metric):
                continue
            png = _chart(records, metric, f"{caption} ({target})")
            name = f"{target}_{metric}.png"
            charts[name] = png
            body.append(f'<img alt="{html.escape(caption)}" src="data:image/png;base64,{base64.b64encode(png).decode()}">')
            markdown += [f"![{caption}]({charts_dir.name}/{name})", ""]
        for metric, caption in ((m.name, m.label) for m in METRICS.values() if m.report):
            if not _has(records, metric):
                continue
            table = _pivot(records, metric)
            body += [f"<h3>{html.escape(caption)}</h3>", _html(table)]
            markdown += [f"### {caption}", "", table.to_markdown(floatfmt=".4g"), ""]
        problems = records[records["status"] != "ok"][["model", "strategy", "status", "reason"]]
        if len(problems):
            body += ["<h3>Skipped and failed</h3>", _html(problems, index=False)]
            markdown += ["### Skipped and failed", "", problems.to_markdown(index=False), ""]

    environment = pd.Series(
        {key: ", ".join(sorted(map(str, frame[key].dropna().unique()))) for key in ENVIRONMENT if key in frame},
        name="value",
    ).to_frame()
    written = datetime.now(timezone.utc).isoformat(timespec="seconds")
    body += ["<h2>Environment</h2>", environment.to_html(), f"<p>Written {written} from {html.escape(str(results))}.</p>"]
    markdown += ["## Environment", "", environment.to_markdown(), "", f"Written {written} from {results}."]

    page = (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{STYLE}</style></head><body>{''.join(body)}<script>{SORT_SCRIPT}</script></body></html>")
    files = {charts_dir / name: png for name, png in charts.items()}
    files.update({html_path: page.encode(), html_path.with_suffix(".md"): ("\n".join(markdown) + "\n").encode()})
    try:
        charts_dir.mkdir(parents=True, exist_ok=True)
        for path, content in files.items():
            _write_whole(path, content)
    except OSError as error:
        raise write_error(f"the report {html_path}", error, "--out") from None
    return html_path


def _write_whole(path: Path, content: bytes) -> None:
    """``content`` into ``path`` whole or not at all: a write that fails (a full disk) leaves
    what was there before, never a report cut short."""
    partial = path.with_name(f".{path.name}.partial")
    try:
        partial.write_bytes(content)
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)
