"""A self-contained HTML report (and Markdown beside it) of a results directory.

What is charted and tabled comes from the metric schema. Tables are pandas pivots of the latest records (model x strategy, per target); charts are
matplotlib bar charts, embedded in the HTML as PNG data and written next to the Markdown.
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

from harness.results.schema import METRICS  # noqa: E402
from harness.results.store import load, with_excess  # noqa: E402
from harness.results.table import format_number  # noqa: E402
from strategies.errors import UsageError  # noqa: E402

ENVIRONMENT = ("layoutbench_commit", "torch_version", "executorch_version", "timm_version",
               "python_version", "machine", "cpu")

STYLE = """
body { font-family: Helvetica, Arial, sans-serif; margin: 2em; color: #222; max-width: 1400px; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: right; }
th { background: #f2f2f2; }
img { max-width: 100%; border: 1px solid #eee; margin-bottom: 1em; }
"""


def _pivot(frame: pd.DataFrame, metric: str) -> pd.DataFrame:
    ok = frame[frame["status"] == "ok"]
    return ok.pivot_table(index="model", columns="strategy", values=metric, aggfunc="first")


def _chart(frame: pd.DataFrame, metric: str, title: str) -> bytes:
    table = _pivot(frame, metric)
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


def _has(frame: pd.DataFrame, metric: str) -> bool:
    return metric in frame.columns and frame.loc[frame["status"] == "ok", metric].notna().any()


def write_report(results: str | Path, out: str | Path | None = None) -> Path:
    """Write ``report.html`` (self-contained) and ``report.md`` (+ PNG charts); returns the HTML path."""
    results = Path(results)
    frame = load(results) if results.is_dir() else pd.DataFrame()
    if frame.empty:
        raise UsageError(f"no records in '{results}'; run layoutbench compare --out {results} first")
    frame = with_excess(frame)
    html_path = Path(out) if out else results / "report.html"
    html_path.parent.mkdir(parents=True, exist_ok=True)
    charts_dir = html_path.with_name(html_path.stem + "_charts")
    charts_dir.mkdir(exist_ok=True)

    title = f"layoutbench report: {results.resolve().name}"
    body, markdown = [f"<h1>{html.escape(title)}</h1>"], [f"# {title}", ""]
    status = frame.groupby(["target", "status"]).size().unstack(fill_value=0)
    body += ["<h2>Records</h2>", status.to_html()]
    markdown += ["## Records", "", status.to_markdown(), ""]

    for target, records in frame.groupby("target"):
        body.append(f"<h2>Target <code>{html.escape(target)}</code></h2>")
        markdown += [f"## Target `{target}`", ""]
        for metric, caption in ((m.name, m.label) for m in METRICS.values() if m.chart):
            if not _has(records, metric):
                continue
            png = _chart(records, metric, f"{caption} ({target})")
            name = f"{target}_{metric}.png"
            (charts_dir / name).write_bytes(png)
            body.append(f'<img alt="{html.escape(caption)}" src="data:image/png;base64,{base64.b64encode(png).decode()}">')
            markdown += [f"![{caption}]({charts_dir.name}/{name})", ""]
        for metric, caption in ((m.name, m.label) for m in METRICS.values() if m.report):
            if not _has(records, metric):
                continue
            table = _pivot(records, metric)
            body += [f"<h3>{html.escape(caption)}</h3>", table.to_html(float_format=format_number, na_rep="-")]
            markdown += [f"### {caption}", "", table.to_markdown(floatfmt=".4g"), ""]
        problems = records[records["status"] != "ok"][["model", "strategy", "status", "reason"]]
        if len(problems):
            body += ["<h3>Skipped and failed</h3>", problems.to_html(index=False)]
            markdown += ["### Skipped and failed", "", problems.to_markdown(index=False), ""]

    environment = pd.Series(
        {key: ", ".join(sorted(map(str, frame[key].dropna().unique()))) for key in ENVIRONMENT if key in frame},
        name="value",
    ).to_frame()
    written = datetime.now(timezone.utc).isoformat(timespec="seconds")
    body += ["<h2>Environment</h2>", environment.to_html(), f"<p>Written {written} from {html.escape(str(results))}.</p>"]
    markdown += ["## Environment", "", environment.to_markdown(), "", f"Written {written} from {results}."]

    html_path.write_text(
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{STYLE}</style></head><body>{''.join(body)}</body></html>"
    )
    html_path.with_suffix(".md").write_text("\n".join(markdown) + "\n")
    return html_path
