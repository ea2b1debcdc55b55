"""A self-contained HTML report (and Markdown beside it) of a results directory.

Per target it starts where a user comparing strategies starts: each strategy against the baseline
(ExecuTorch's own pass), in per cent per model (:mod:`harness.results.relative`), for the metrics the
schema charts: a table per strategy, a chart (bars per model, or over more than :data:`TOP_N` models the
distribution), the measured change against the predicted one, and a table per model and strategy with the
prediction's error and trust. Then how far the models got and the commonest failures
(:mod:`harness.results.summary`), model x strategy tables of the other metrics, and the skipped and
failed records. Values are in human units; tables sort by any column in the HTML; charts
(:mod:`harness.results.charts`) are SVG, embedded in the HTML and written next to the Markdown, which
holds the same sections and tables.
"""

import html
import os
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from harness.results import charts, relative, summary
from harness.results.frames import NO_STRATEGY, load, with_derived
from harness.results.results_dir import ResultsDir
from harness.results.report_blocks import (
    SORT_SCRIPT, STYLE, Chart, Heading, Links, Note, Table, html_block, markdown_block)
from harness.results.schema import METRICS, Metric
from layoutkit.errors import UsageError, write_error
from layoutkit.files import write_whole
from layoutkit.reference_strategies import BASELINE_STRATEGY, OPTIMUM_STRATEGY

ENVIRONMENT = ("layoutbench_commit", "torch_version", "executorch_version", "timm_version",
               "python_version", "machine", "cpu")
TOP_N = 30  # up to this many models a chart has a bar per model; over it, it shows the distribution
# How far a prediction can be trusted, shown beside it where the records have it.
PREDICTION_TRUST = ("prediction_error", "predicted_measured_share", "predicted_gpu_ms_low", "predicted_gpu_ms_high",
                    "predicted_outside_support_share")


def _has(frame: pd.DataFrame, metric: str) -> bool:
    return metric in frame.columns and frame.loc[frame["status"] == "ok", metric].notna().any()


def _title(metric: Metric) -> str:
    return metric.heading or metric.column or metric.label


def _strategy_order(strategies) -> list[str]:
    return sorted(set(strategies), key=lambda s: (s != BASELINE_STRATEGY, s))


def _tally(changes: dict[str, pd.DataFrame]) -> Table:
    """Per metric and strategy: on how many models lower, equal, higher, and by how much."""
    rows = [relative.tally(change).assign(metric=name) for name, change in changes.items()]
    frame = pd.concat(rows, ignore_index=True)
    better = frame["metric"].map(lambda name: METRICS[name].better)
    frame = frame.assign(metric=frame["metric"].map(lambda name: _title(METRICS[name])))
    frame = frame[["metric", *frame.columns.drop("metric")]]
    return Table(f"Per strategy: change relative to {BASELINE_STRATEGY}, over the models", frame,
                 units={c: "change" for c in ("median", "lowest", "highest")},
                 better={c: better for c in ("median", "lowest", "highest")})


def _per_model(records: pd.DataFrame, charted: list[Metric], changes: dict[str, pd.DataFrame]) -> Table:
    """Per model and strategy: each charted metric and its change, the prediction's trust beside it."""
    rows = records[(records["status"] == "ok") & (records["strategy"] != NO_STRATEGY)]
    order = {s: i for i, s in enumerate(_strategy_order(rows["strategy"]))}
    rows = rows.sort_values(["model", "strategy"], key=lambda c: c.map(order) if c.name == "strategy" else c)
    rows = rows.set_index(["model", "strategy"])
    trust_after = "measured_gpu_ms" if "measured_gpu_ms" in changes else "predicted_gpu_ms"
    columns, units, better = {}, {}, {}
    for metric in charted:
        title = _title(metric)
        columns[title], units[title] = rows[metric.name], metric.unit
        if metric.name in changes:
            change_title = f"{title} change"
            columns[change_title] = changes[metric.name].stack().reindex(rows.index)
            units[change_title], better[change_title] = "change", metric.better
        if metric.name == trust_after:
            for trust in (METRICS[name] for name in PREDICTION_TRUST if _has(records, name)):
                columns[_title(trust)], units[_title(trust)] = rows[trust.name], trust.unit
    frame = pd.DataFrame(columns).reset_index()
    return Table("Per model and strategy", frame, units, better)


def _against_baseline(target: str, records: pd.DataFrame, charted: list[Metric], palette: dict) -> list:
    changes = {m.name: relative.changes(records, m.name) for m in charted}
    changes = {name: change for name, change in changes.items() if not change.empty}
    if not changes:
        return []
    models = len(set().union(*(c.index for c in changes.values())))
    labelled = {METRICS[name].label: change for name, change in changes.items()}
    panels = ", ".join(labelled)
    blocks = [Heading(f"Each strategy against {BASELINE_STRATEGY} (ExecuTorch's pass)"),
              Note(f"Change = (strategy - {BASELINE_STRATEGY}) / {BASELINE_STRATEGY} on the same model, in per cent: "
                   f"negative is less time, fewer transitions, less memory. Equal: within "
                   f"{100 * relative.EQUAL:g} %. 'from 0': {BASELINE_STRATEGY} has none, the strategy some."),
              _tally(changes)]
    if models <= TOP_N:
        blocks.append(Chart(f"Change relative to {BASELINE_STRATEGY} per model ({target})",
                            f"{target}_change_per_model.svg", charts.per_model(labelled, palette, BASELINE_STRATEGY),
                            panels))
    else:
        blocks += [Note(f"{models} models: a dot per model at its change, a row per strategy; the table below "
                        f"lists every model."),
                   Chart(f"Distribution of the change relative to {BASELINE_STRATEGY} ({target})",
                         f"{target}_change_distribution.svg",
                         charts.distribution(labelled, palette, BASELINE_STRATEGY), panels)]
    if {"predicted_gpu_ms", "measured_gpu_ms"} <= set(changes):
        blocks += [Note("Measured against predicted change of GPU time (operators and transitions, staging "
                        "left out): on the diagonal the prediction held."),
                   Chart(f"Measured against predicted change ({target})", f"{target}_predicted_vs_measured.svg",
                         charts.predicted_vs_measured(changes["predicted_gpu_ms"], changes["measured_gpu_ms"],
                                                      palette, BASELINE_STRATEGY))]
    elif "predicted_gpu_ms" in changes:
        blocks.append(Note("GPU time is predicted only: these programs were not run (target vulkan-run measures "
                           "them)."))
    return [*blocks, _per_model(records, charted, changes)]


def _summary(records: pd.DataFrame) -> list[Table]:
    """The summary tables of one target's records."""
    tables = [Table("How far the models got", summary.stages(records).rename_axis("stage").reset_index()),
              Table("Strategies on the models every strategy measured",
                    summary.per_strategy(records).rename_axis("strategy").reset_index(),
                    units={"pass seconds": "seconds"})]
    # Above the count optimum says little of a strategy that minimises time: left out where time is predicted.
    if not _has(records, "predicted_gpu_ms"):
        for strategy in sorted(set(summary.comparable(records)["strategy"]) - {OPTIMUM_STRATEGY}):
            tables.append(Table(f"Where {strategy} is above the proven optimum",
                                summary.above_optimum(records, strategy).rename_axis("model").reset_index()))
    return [*tables, Table("Extremes", summary.extremes(records)),
            Table("Commonest failures", summary.failure_reasons(records).rename_axis("reason").reset_index())]


def _target(target: str, records: pd.DataFrame, palette: dict) -> list:
    charted = sorted((m for m in METRICS.values() if m.chart and _has(records, m.name)), key=lambda m: m.chart)
    with_strategies = records["strategy"].ne(NO_STRATEGY).any()
    compared = _against_baseline(target, records, charted, palette) if with_strategies else []
    blocks = [Heading(f"Target {target}", 2), *compared]
    shown = {m.name for m in charted} if compared else set()  # in the table per model and strategy
    if not compared:
        for metric in charted:
            table, caption = largest(relative.values(records, metric.name), f"{metric.label} ({target})")
            blocks.append(Chart(caption, f"{target}_{metric.name}.svg",
                                charts.per_model_values(table, metric.label, metric.unit, palette)))
    if with_strategies:
        blocks += _summary(records)
    for metric in (m for m in METRICS.values() if m.report and _has(records, m.name) and m.name not in shown):
        table = relative.values(records, metric.name)
        table = table[_strategy_order(table.columns)].rename_axis(columns=None).reset_index()
        blocks.append(Table(metric.label, table, units={c: metric.unit for c in table.columns if c != "model"}))
    problems = records[records["status"] != "ok"][["model", "strategy", "status", "reason"]]
    if len(problems):
        blocks.append(Table("Skipped and failed", problems.reset_index(drop=True)))
    return blocks


def largest(table: pd.DataFrame, title: str) -> tuple[pd.DataFrame, str]:
    """At most TOP_N rows of a model x strategy table (those with the largest values), and a title that says so."""
    if len(table) <= TOP_N:
        return table, title
    return table.loc[table.max(axis=1).nlargest(TOP_N).index], f"{title}: the {TOP_N} largest of {len(table)} models"


def _explored(results: Path, html_dir: Path) -> list:
    """Links to the Model Explorer overlays ``explore`` wrote into the results directory, per
    model and strategy pair."""
    rows = [(f"{etrecord.parent.name}: {folder.name.replace('-vs-', ' vs ')}",
             [(path.name, Path(os.path.relpath(path, html_dir)).as_posix()) for path in (etrecord, *overlays)])
            for etrecord, folder, overlays in ResultsDir(results).explored()]
    if not rows:
        return []
    return [Heading("Model Explorer overlays", 2),
            Note("Per model, its edge program as an ETRecord and a strategy's (or two strategies') node data, one "
                 "file per overlay: `layoutbench explore MODEL --strategy A --vs B --out RESULTS` opens them in "
                 "Model Explorer (docs/model-explorer.md), as does model-explorer "
                 "--extensions=executorch_extension_model_explorer with the ETRecord and 'Add per-node data'."),
            Links("Overlay files", rows)]


def write_report(results: str | Path, out: str | Path | None = None) -> Path:
    """Write ``report.html`` (self-contained) and ``report.md`` (+ SVG charts); returns the HTML path."""
    results = Path(results)
    frame = load(results) if results.is_dir() else pd.DataFrame()
    if frame.empty:
        raise UsageError(f"no records in '{results}'; run layoutbench run --out {results} first")
    frame = with_derived(frame)
    html_path = Path(out) if out else ResultsDir(results).report
    if html_path.is_dir():
        raise UsageError(f"{html_path} is a directory; name the HTML file to write (e.g. --out "
                         f"{html_path / 'report.html'})")
    charts_dir = html_path.with_name(html_path.stem + "_charts")
    palette = charts.colours(_strategy_order(frame["strategy"].loc[lambda s: s != NO_STRATEGY]), BASELINE_STRATEGY)

    title = f"layoutbench report: {results.resolve().name}"
    status = frame.groupby(["target", "status"]).size().unstack(fill_value=0).rename_axis(columns=None)
    blocks = [Heading("Records", 2), Table("Records per target and status", status.reset_index())]
    for target, records in frame.groupby("target"):
        blocks += _target(target, records, palette)
    blocks += _explored(results, html_path.parent)
    environment = pd.DataFrame(
        [(key, ", ".join(sorted(map(str, frame[key].dropna().unique())))) for key in ENVIRONMENT if key in frame],
        columns=["what", "value"])
    written = datetime.now(timezone.utc).isoformat(timespec="seconds")
    blocks += [Heading("Environment", 2), Table("Versions and machine", environment),
               Note(f"Written {written} from {results}.")]

    body = "".join(html_block(block) for block in blocks)
    page = (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{STYLE}</style></head><body><h1>{html.escape(title)}</h1>{body}"
            f"<script>{SORT_SCRIPT}</script></body></html>")
    markdown = "\n".join([f"# {title}\n", *(markdown_block(block, charts_dir.name) for block in blocks)])
    files = {**{charts_dir / chart.file_name: chart.svg for chart in blocks if isinstance(chart, Chart)},
             html_path: page.encode(), html_path.with_suffix(".md"): markdown.encode()}
    try:
        charts_dir.mkdir(parents=True, exist_ok=True)
        for stale in (path for path in charts_dir.iterdir() if path.suffix in (".svg", ".png")):  # an earlier report's
            stale.unlink()
        for path, content in files.items():
            write_whole(path, content)
    except OSError as error:
        raise write_error(f"the report {html_path}", error, "--out") from None
    return html_path
