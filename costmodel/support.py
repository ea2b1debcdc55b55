"""Where a cost table has measured anything like a node: its *support*.

A fit answers for every node, also for kernels it never saw run and sizes far from those it
did; the answer is then an extrapolation, and its error unknown. A node is inside the
support when the corpus measured its kernel family (:mod:`costmodel.kernel_families`) and
each of :data:`FEATURES` lies within the range the family's measured nodes span; ranges per
feature, not a distance, so that a record can say which feature left the support and by
how much. Transitions are inside where a transition between the same two representations
was measured at that many elements or a size around it.
"""

from dataclasses import dataclass

import pandas as pd

from costmodel.features import node_features
from costmodel.kernel_families import kernel_family
from costmodel.queries import Query

# What sizes a node: its work (multiply-adds, else elements moved), its output, and a
# convolution's or product's depth (channels a group times the kernel, the contracted dim).
FEATURES = ("log_work", "log_output_elements", "log_serial")
NEVER_MEASURED = "never measured"
SLACK = 1.0  # log2: a node half or twice the size of a measured one is still inside


@dataclass(frozen=True)
class Support:
    """Per family, the range of each of :data:`FEATURES` its measured nodes span, and how
    many nodes measured it."""

    ranges: dict  # family -> {feature: [low, high]}
    nodes: dict  # family -> measured nodes

    @classmethod
    def of(cls, frame: pd.DataFrame) -> "Support":
        """The support of measured nodes: rows with a ``family`` column and :data:`FEATURES`."""
        grouped = frame.groupby("family")
        ranges = {family: {f: [float(rows[f].min()), float(rows[f].max())] for f in FEATURES}
                  for family, rows in grouped}
        return cls(ranges, {family: int(count) for family, count in grouped.size().items()})

    def outside(self, family: str, features: dict) -> str | None:
        """Why a node of ``family`` with these ``features`` lies outside, or None where inside."""
        if family not in self.ranges:
            return f"{family} {NEVER_MEASURED}"
        for feature in FEATURES:
            low, high = self.ranges[family][feature]
            value = features.get(feature, 0.0)
            if not low - SLACK <= value <= high + SLACK:
                return f"{family}: {feature} {value:.1f} outside the measured {low:.1f}-{high:.1f}"
        return None

    def place(self, query: Query) -> tuple[str, str | None]:
        """A priced query's kernel family, and why it lies outside (None where inside)."""
        family = kernel_family(query.signature, query.input, query.output)
        return family, self.outside(family, node_features(query.signature, query.input, query.output, query.transition))

    def to_json(self) -> dict:
        return {family: {"nodes": self.nodes[family], **self.ranges[family]} for family in sorted(self.ranges)}

    @classmethod
    def from_json(cls, data: dict) -> "Support":
        return cls({family: {f: list(entry[f]) for f in FEATURES} for family, entry in data.items()},
                   {family: entry["nodes"] for family, entry in data.items()})
