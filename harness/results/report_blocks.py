"""The blocks a report is made of (headings, notes, tables, charts, links) and how each is
written in HTML and in Markdown: values in their units, changes coloured by direction, tables
that sort by value, charts embedded (:mod:`harness.results.report` puts them together)."""

import base64
import html
import numbers
from dataclasses import dataclass, field

import pandas as pd

from harness.results import relative
from harness.results.table import FORMATS, format_number

BETTER, WORSE = "#1a7f37", "#c62828"

STYLE = """
body { font-family: Helvetica, Arial, sans-serif; margin: 2em; color: #222; max-width: 1500px; }
h2 { border-bottom: 2px solid #ddd; padding-bottom: 0.2em; margin-top: 2em; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: right; }
td { white-space: nowrap; }
th { background: #f2f2f2; max-width: 7em; }
figure { margin: 1em 0 1.5em; }
figcaption { font-weight: bold; margin-bottom: 0.3em; }
img { max-width: 100%; }
p.note { color: #555; max-width: 60em; }
table.sortable th { cursor: pointer; }
"""

# Click a heading to sort by that column: numbers by their value in any unit the tables
# print (1.2 MiB above 900 KiB, 1.1 s above 900 ms, a change "from 0" above every other), text
# after them; no library, works offline.
SORT_SCRIPT = """
var SCALE = {TiB: 1099511627776, GiB: 1073741824, MiB: 1048576, KiB: 1024, B: 1, s: 1000, ms: 1,
             k: 1e3, M: 1e6, G: 1e9};
document.querySelectorAll("table.sortable").forEach(function (table) {
  table.querySelectorAll("thead th").forEach(function (heading, column) {
    heading.addEventListener("click", function () {
      var body = table.tBodies[0], rows = Array.from(body.rows), up = heading.dataset.order !== "up";
      var value = function (row) {
        var text = row.cells[column] ? row.cells[column].textContent.trim() : "";
        if (text === "from 0") return Infinity;  // a change from a zero baseline
        var match = text.replace(/,/g, "").match(/^([-+]?[0-9.]+(?:e[-+]?[0-9]+)?)\\s*([A-Za-z]*)/);
        return match ? parseFloat(match[1]) * (SCALE[match[2]] || 1) : text;
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


@dataclass(frozen=True)
class Heading:
    text: str
    level: int = 3


@dataclass(frozen=True)
class Note:
    text: str


@dataclass(frozen=True)
class Table:
    caption: str
    frame: pd.DataFrame  # raw values, no index
    units: dict[str, str] = field(default_factory=dict)  # column -> a key of FORMATS
    better: dict[str, str | pd.Series] = field(default_factory=dict)  # change column -> direction (per row)


@dataclass(frozen=True)
class Chart:
    caption: str
    file_name: str
    svg: bytes
    description: str = ""  # what the caption does not say (the panels' metrics): the image's alternative text


@dataclass(frozen=True)
class Links:
    """A list of labelled links (to files beside the report), one row per label."""

    caption: str
    rows: list[tuple[str, list[tuple[str, str]]]]  # (label, [(text, relative address)])


def _cell(value, unit: str | None) -> str:
    """A value in its unit (a key of FORMATS); other numbers as counts; ``-`` where there is none."""
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return "-"
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        return str(value)
    return FORMATS[unit](value) if unit is not None else format_number(value)


def _formatted(table: Table) -> pd.DataFrame:
    return pd.DataFrame({c: table.frame[c].map(lambda v, unit=table.units.get(c): _cell(v, unit))
                         for c in table.frame.columns})


def _colours(table: Table) -> pd.DataFrame:
    """CSS per cell: a change in the better direction green, in the worse red."""
    css = pd.DataFrame("", index=table.frame.index, columns=table.frame.columns)
    for column, better in table.better.items():
        change = pd.to_numeric(table.frame[column], errors="coerce")
        lower, higher = change < -relative.EQUAL, change > relative.EQUAL
        lower_better = pd.Series(better, index=change.index).eq("lower")
        higher_better = pd.Series(better, index=change.index).eq("higher")
        css.loc[(lower & lower_better) | (higher & higher_better), column] = f"color: {BETTER}"
        css.loc[(higher & lower_better) | (lower & higher_better), column] = f"color: {WORSE}"
    return css


def html_block(block) -> str:
    if isinstance(block, Heading):
        return f"<h{block.level}>{html.escape(block.text)}</h{block.level}>"
    if isinstance(block, Note):
        return f"<p class='note'>{html.escape(block.text)}</p>"
    if isinstance(block, Links):
        items = "".join(f"<li>{html.escape(label)}: " + ", ".join(
            f"<a href='{html.escape(href, quote=True)}'>{html.escape(text)}</a>" for text, href in links) + "</li>"
            for label, links in block.rows)
        return f"<h3>{html.escape(block.caption)}</h3><ul>{items}</ul>"
    if isinstance(block, Chart):
        data = base64.b64encode(block.svg).decode()
        alt = html.escape(f"{block.caption}: {block.description}" if block.description else block.caption, quote=True)
        return (f"<figure><figcaption>{html.escape(block.caption)}</figcaption>"
                f"<img alt='{alt}' src='data:image/svg+xml;base64,{data}'></figure>")
    caption = f"<h3>{html.escape(block.caption)}</h3>"
    if block.frame.empty:
        return caption + "<p>none</p>"
    styler = (_formatted(block).style.hide(axis="index").set_table_attributes('class="sortable"')
              .format(escape="html").format_index(escape="html", axis=1)
              .apply(lambda _: _colours(block), axis=None))
    return caption + styler.to_html()


def markdown_block(block, charts_dir: str) -> str:
    if isinstance(block, Heading):
        return f"{'#' * block.level} {block.text}\n"
    if isinstance(block, Note):
        return f"{block.text}\n"
    if isinstance(block, Links):
        items = "".join(f"- {label}: " + ", ".join(f"[{text}]({href})" for text, href in links) + "\n"
                        for label, links in block.rows)
        return f"### {block.caption}\n\n{items}"
    if isinstance(block, Chart):
        return f"**{block.caption}**\n\n![{block.caption}]({charts_dir}/{block.file_name})\n"
    align = ["right" if pd.api.types.is_numeric_dtype(block.frame[c]) else "left" for c in block.frame.columns]
    table = _formatted(block).to_markdown(index=False, disable_numparse=True, colalign=align) if len(block.frame) \
        else "none"
    return f"### {block.caption}\n\n{table}\n"
