"""The report's charts, as SVG (matplotlib): each strategy's change relative to the baseline per model
(bars, one panel per metric), over many models its distribution (a dot per model, a row per strategy), the
measured change against the predicted one, and where a target has no baseline strategy the values per
model. Every axis says its unit; legends sit outside the axes; a strategy has one colour in every chart.
"""

import io
import textwrap

import matplotlib

matplotlib.use("Agg")  # no display: render to files
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from harness.results.relative import EQUAL  # noqa: E402

# Text stays text (searchable, sharp at any zoom); the same records give the same file.
STYLE = {"svg.fonttype": "none", "svg.hashsalt": "layoutbench", "font.family": "DejaVu Sans", "font.size": 9,
         "axes.spines.top": False, "axes.spines.right": False}
# Okabe and Ito's colour-blind safe colours, blue, orange and purple first: the tables' green and red
# mean better and worse, so a strategy should not look like either.
PALETTE = ("#0072B2", "#E69F00", "#CC79A7", "#56B4E9", "#009E73", "#D55E00", "#F0E442", "#000000")
BASELINE_COLOUR = "#999999"
BAR_HEIGHT_INCHES = 0.2
PANEL_WIDTH_INCHES = 2.4
LABELLED_POINTS = 30
# Axis units of absolute values: the largest unit the values reach, by unit of the schema.
_SCALES = {"bytes": (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10), ("B", 1)), "ms": (("ms", 1),),
           "seconds": (("s", 1), ("ms", 1e-3)), "count": (("count", 1),), "cycles": (("M cycles", 1e6), ("cycles", 1)),
           "fraction": (("%", 0.01),), "per_second": (("1/s", 1),), "hertz": (("MHz", 1e6), ("Hz", 1))}


def colours(strategies, baseline: str) -> dict[str, str]:
    """One colour per strategy, the same in every chart of a report; the baseline grey."""
    others = [s for s in strategies if s != baseline]
    return {baseline: BASELINE_COLOUR, **{s: PALETTE[i % len(PALETTE)] for i, s in enumerate(others)}}


def _svg(figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="svg", metadata={"Date": None})
    plt.close(figure)
    return buffer.getvalue()


def _legend(figure, strategies, palette) -> None:
    handles = [plt.Rectangle((0, 0), 1, 1, color=palette[s]) for s in strategies]
    figure.legend(handles, strategies, loc="outside upper center", ncols=min(len(strategies), 6), frameon=False)


def change_axis(baseline: str) -> str:
    return f"change vs {baseline} (%)"


def _change_panel(axes, label: str, baseline: str) -> None:
    axes.axvline(0, color="#444", linewidth=0.8)
    axes.set_title(textwrap.fill(label, 34), fontsize=9)
    axes.set_xlabel(change_axis(baseline))
    axes.grid(axis="x", color="#ddd", linewidth=0.6)
    axes.set_axisbelow(True)


def per_model(changes: dict[str, pd.DataFrame], palette: dict, baseline: str) -> bytes:
    """Horizontal bars: per model (rows, largest drop of the first panel on top) and
    strategy (colours), the change of each metric (panels, keyed by label) relative to the
    baseline. No change is a tick on the zero line; a change from 0 is marked ``from 0``."""
    models = sorted(set().union(*(c.index for c in changes.values())))
    first = next(iter(changes.values())).replace([np.inf, -np.inf], np.nan).min(axis=1).reindex(models).fillna(0.0)
    models.sort(key=lambda model: (first[model], model))
    strategies = [s for s in palette if any(s in c.columns for c in changes.values())]
    slot = 1.0 / (len(strategies) + 1)
    height = max(1.2, len(models) * len(strategies) * BAR_HEIGHT_INCHES) + 1.6
    with plt.rc_context(STYLE):
        figure, panels = plt.subplots(1, len(changes), sharey=True, squeeze=False, layout="constrained",
                                      figsize=(PANEL_WIDTH_INCHES * len(changes) + 2.2, height))
        for axes, (label, change) in zip(panels[0], changes.items()):
            for j, strategy in enumerate(strategies):
                column = change[strategy].reindex(models) if strategy in change else pd.Series(np.nan, models)
                positions = np.arange(len(models)) + (j - (len(strategies) - 1) / 2) * slot
                finite = np.isfinite(column.to_numpy(dtype=float))
                axes.barh(positions[finite], 100 * column[finite], height=slot, color=palette[strategy])
                equal = column.abs().le(EQUAL).to_numpy()  # no bar to see: a ring says "measured, equal"
                axes.plot(np.zeros(equal.sum()), positions[equal], linestyle="", marker="o", markersize=4,
                          markerfacecolor="white", markeredgecolor=palette[strategy], zorder=3)
                for position in positions[np.isinf(column.to_numpy(dtype=float))]:
                    axes.text(0, position, " from 0", va="center", fontsize=7, color=palette[strategy])
            _change_panel(axes, label, baseline)
            axes.use_sticky_edges = False  # room beyond the longest bar and the zero line
            axes.margins(x=0.08)
            axes.xaxis.set_major_locator(MaxNLocator(nbins=5))
        panels[0][0].set_yticks(range(len(models)), models)
        panels[0][0].set_ylim(len(models) - 0.5, -0.5)
        _legend(figure, strategies, palette)
        return _svg(figure)


def distribution(changes: dict[str, pd.DataFrame], palette: dict, baseline: str) -> bytes:
    """Per metric (panels) and strategy (rows), a dot per model at its change relative to the
    baseline, the rows labelled with on how many models it is lower, equal and higher.
    Changes from 0 (infinite) count as higher and are left to the tables."""
    strategies = [s for s in palette if any(s in c.columns for c in changes.values())]
    jitter = np.random.default_rng(0)  # the same records give the same picture
    with plt.rc_context(STYLE):
        figure, panels = plt.subplots(1, len(changes), squeeze=False, layout="constrained",
                                      figsize=(5.4 * len(changes) + 1.2, 0.9 * len(strategies) + 1.4))
        for axes, (label, change) in zip(panels[0], changes.items()):
            rows = [s for s in strategies if s in change]
            for row, strategy in enumerate(rows):
                column = change[strategy].dropna()
                finite = column[np.isfinite(column)]
                axes.scatter(100 * finite, row + jitter.uniform(-0.3, 0.3, len(finite)), s=9, alpha=0.55,
                             color=palette[strategy], linewidths=0)
            counts = [_counts(change[s].dropna()) for s in rows]
            axes.set_yticks(range(len(rows)), [f"{s}\n{c}" for s, c in zip(rows, counts)])
            axes.set_ylim(len(rows) - 0.5, -0.5)
            _change_panel(axes, label, baseline)
        return _svg(figure)


def _counts(change: pd.Series) -> str:
    lower, higher = int((change < -EQUAL).sum()), int((change > EQUAL).sum())
    return f"{lower} lower, {len(change) - lower - higher} equal, {higher} higher"


def predicted_vs_measured(predicted: pd.DataFrame, measured: pd.DataFrame, palette: dict, baseline: str) -> bytes:
    """One point per model and strategy: the measured change of GPU time against the
    predicted one, both relative to the baseline; on the diagonal the prediction held."""
    with plt.rc_context(STYLE):
        figure, axes = plt.subplots(figsize=(5.2, 4.6), layout="constrained")
        strategies = [s for s in palette if s in predicted and s in measured]
        points = []
        for strategy in strategies:
            both = pd.concat([predicted[strategy], measured[strategy]], axis=1, join="inner").dropna()
            both = 100 * both[np.isfinite(both).all(axis=1)]
            axes.scatter(both.iloc[:, 0], both.iloc[:, 1], color=palette[strategy], s=22, zorder=3)
            points += [(model, x, y) for model, (x, y) in both.iterrows()]
        if len(points) <= LABELLED_POINTS:  # few enough to name the model of each
            for model, x, y in points:
                axes.annotate(model, (x, y), xytext=(4, 3), textcoords="offset points", fontsize=7, color="#555")
        low, high = (min(axes.get_xlim()[0], axes.get_ylim()[0]), max(axes.get_xlim()[1], axes.get_ylim()[1]))
        axes.plot([low, high], [low, high], color="#888", linewidth=0.8, linestyle="--")
        axes.axhline(0, color="#444", linewidth=0.6)
        axes.axvline(0, color="#444", linewidth=0.6)
        axes.set_xlabel(f"predicted GPU time: {change_axis(baseline)}")
        axes.set_ylabel(f"measured GPU time: {change_axis(baseline)}")
        axes.grid(color="#ddd", linewidth=0.6)
        _legend(figure, strategies, palette)
        return _svg(figure)


def axis_unit(unit: str, values: pd.DataFrame) -> tuple[str, float]:
    """The name and size of the unit an axis of these values (in the schema's ``unit``) shows."""
    largest = float(np.nanmax(np.abs(values.to_numpy(dtype=float)))) if values.size else 0.0
    scales = _SCALES.get(unit, ((unit, 1),))
    return next(((name, size) for name, size in scales if largest >= size), scales[-1])


def per_model_values(table: pd.DataFrame, label: str, unit: str, palette: dict) -> bytes:
    """Vertical bars of a model x strategy table of a metric (``label``, in the schema's
    ``unit``) where a target has no baseline strategy, the axis in the unit the values reach."""
    name, size = axis_unit(unit, table)
    with plt.rc_context(STYLE):
        figure, axes = plt.subplots(figsize=(max(6.0, 0.5 * len(table) * max(1, table.shape[1]) + 2.5), 4.4),
                                    layout="constrained")
        (table / size).plot.bar(ax=axes, width=0.8, legend=False,
                                color=[palette.get(s, BASELINE_COLOUR) for s in table.columns])
        axes.set(xlabel="", ylabel=f"{label} ({name})")
        if unit == "count":
            axes.yaxis.set_major_locator(MaxNLocator(integer=True))
        axes.tick_params(axis="x", labelrotation=30)
        plt.setp(axes.get_xticklabels(), ha="right")
        axes.grid(axis="y", color="#ddd", linewidth=0.6)
        axes.set_axisbelow(True)
        if table.shape[1] > 1:
            _legend(figure, list(table.columns), palette)
        return _svg(figure)
