"""What a device's cost table rewards, as rules a person reads and compares across devices
(``layoutbench preferences``; the harness renders them, :mod:`harness.inspection.preferences`).

A table (:mod:`costmodel.table`) keeps, per operator, a few *probes*: nodes of its
calibration corpus measured in several pairs of representations (input, output). Each probe
is priced here in each of its pairs by the table's fitted model, not by its measurements, so
what is read is the rule the table applies to a model it never saw.

A probe is compared with the pair ExecuTorch's pass picks for a node with no neighbours to
agree with: texture before buffer, then the first layout in the enum's order (width-packed
texture wherever the probe was measured in it). The probe *prefers* its fastest pair where
that saves more against ExecuTorch's pick than the table's expected error for the operator;
else it has no clear preference. An operator's rule is what most of its probes prefer, or,
where they disagree, one split on a shape feature that fits more of them ("width-packed buffer
when the contracted dim >= 512, else no clear preference"), with how many probes it fits.
"""

import math
import statistics
from collections import Counter
from dataclasses import dataclass

from costmodel.features import GraphLoad, node_features
from costmodel.queries import Query
from costmodel.table import UNSEEN_OPERATOR_ERROR, CostTable
from layoutkit.errors import UsageError

Pair = tuple[str, str]  # (input, output) representations, named as TEXTURE_3D/WIDTH_PACKED

# Shape features a rule may split on (:mod:`costmodel.features`), in the order ties are
# broken, as a person reads them; log2 ones are shown as sizes.
SPLITS = {
    "log_contracted": "contracted dim", "log_in_channels": "input channels", "log_out_channels": "output channels",
    "kernel_h": "kernel height", "stride": "stride", "log_output_w": "width (last dim)", "log_output_h": "height",
    "log_output_c": "channels", "log_output_elements": "output elements",
}
MIN_SIDE = 2  # probes on each side of a split, so that no rule rests on a single node


def representation_label(name: str) -> str:
    """``TEXTURE_3D/WIDTH_PACKED`` as ``width-packed texture``; ``BUFFER/PACKED_INT8_4W4C`` as ``int8 4W4C buffer``."""
    storage, _, layout = name.partition("/")
    kind = "texture" if storage.startswith("TEXTURE") else storage.lower()
    if layout.startswith("PACKED_INT8_"):
        return f"int8 {layout.removeprefix('PACKED_INT8_')} {kind}"
    return f"{layout.lower().replace('_', '-')} {kind}"


def pair_label(pair: Pair) -> str:
    """A pair as a person reads it: one representation where input and output share it."""
    return " -> ".join(representation_label(name) for name in dict.fromkeys(pair))


def percent(fraction: float) -> str:
    return f"{fraction:.0%}" if fraction >= 0.01 or fraction == 0 else "<1%"


def _pass_order(name: str) -> tuple[bool, int]:
    """Where ExecuTorch's pass ranks a representation it may pick: texture first, then by layout enum."""
    from executorch.backends.vulkan.serialization.vulkan_graph_schema import VkMemoryLayout

    storage, _, layout = name.partition("/")
    member = VkMemoryLayout.__members__.get(layout) or VkMemoryLayout.__members__.get(f"TENSOR_{layout}")
    return not storage.startswith("TEXTURE"), member.value if member is not None else math.inf


def executorch_pick(pairs: list[Pair]) -> Pair:
    """The pair ExecuTorch's pass picks among ``pairs`` for a node alone (its output's rank first)."""
    return min(pairs, key=lambda pair: (_pass_order(pair[1]), _pass_order(pair[0])))


@dataclass(frozen=True)
class Probe:
    """One probe priced: ExecuTorch's pick, the fastest pair and what it saves against that
    pick (relative), what the probe prefers (None: no clear preference), its shape features."""

    output: list
    executorch: Pair
    fastest: Pair
    saving: float
    prefers: Pair | None
    shape: dict


@dataclass(frozen=True)
class Split:
    feature: str
    threshold: float  # probes at or above it take ``above``'s branch

    def text(self, at_least: bool) -> str:
        value = round(2 ** self.threshold) if self.feature.startswith("log_") else self.threshold
        return f"{SPLITS[self.feature]} {'>=' if at_least else '<'} {value:g}"


@dataclass(frozen=True)
class OperatorPreference:
    """An operator's rule: ``above`` (what its probes prefer; above ``split`` where there is
    one, ``below`` under it), fitting ``fits`` of its probes."""

    operator: str
    error: float
    probes: list[Probe]
    above: Pair | None
    split: Split | None = None
    below: Pair | None = None
    fits: int = 0

    @property
    def executorch(self) -> Pair:
        return Counter(p.executorch for p in self.probes).most_common(1)[0][0]

    @property
    def fastest(self) -> tuple[Pair, int]:
        """The pair fastest most often, and in how many probes."""
        return Counter(p.fastest for p in self.probes).most_common(1)[0]

    @property
    def fastest_text(self) -> str:
        """The pair fastest most often, whether or not the saving is clear of the error."""
        fastest, count = self.fastest
        saving = statistics.median(p.saving for p in self.probes if p.fastest == fastest)
        gain = f"saves {percent(saving)}" if saving else "ExecuTorch's pick"
        return f"{pair_label(fastest)} in {count} of {len(self.probes)} ({gain})"

    def _branch(self, preferred: Pair | None) -> str:
        if preferred is None:
            return "no clear preference"
        saving = statistics.median(p.saving for p in self.probes if p.prefers == preferred)
        return f"{pair_label(preferred)} (saves {percent(saving)})"

    @property
    def rule(self) -> str:
        fits = f"{self.fits} of {len(self.probes)} probes agree"
        if self.split is None:
            return f"{self._branch(self.above)}; {fits}"
        # The branch that prefers something first: "P when F < T, else no clear preference".
        first, second, at_least = ((self.above, self.below, True) if self.above is not None
                                   else (self.below, self.above, False))
        return f"{self._branch(first)} when {self.split.text(at_least)}, else {self._branch(second)}; {fits}"

    def to_json(self) -> dict:
        fastest, count = self.fastest
        return {"operator": self.operator, "error": self.error, "executorch": list(self.executorch),
                "fastest": list(fastest), "fastest_probes": count, "rule": self.rule,
                "prefers": list(self.above) if self.above else None,
                "split": {"feature": self.split.feature, "at_least": self.split.threshold} if self.split else None,
                "otherwise": list(self.below) if self.below else None, "fits": self.fits,
                "probes": [{"output": p.output, "executorch": list(p.executorch), "fastest": list(p.fastest),
                            "saving": p.saving, "prefers": list(p.prefers) if p.prefers else None}
                           for p in self.probes]}


def _priced(table: CostTable) -> list[tuple[str, float, list[Probe]]]:
    """Each operator, its expected error, and its probes priced by the table's fit in each of their pairs."""
    operators = sorted(table.probes.items())
    queries = [Query(probe["signature"], first, second, load=GraphLoad(**probe["load"]))
               for _, probes in operators for probe in probes for first, second in probe["pairs"]]
    prices = iter(price.ms for price in table.price(queries))  # in the order of the queries
    priced = []
    for operator, probes in operators:
        error, priced_probes = table.errors.get(operator, UNSEEN_OPERATOR_ERROR), []
        for probe in probes:
            ms = {tuple(pair): next(prices) for pair in probe["pairs"]}
            default = executorch_pick(list(ms))
            fastest = min(ms, key=lambda pair: (ms[pair], pair != default))  # a tie goes to ExecuTorch's pick
            saving = (ms[default] - ms[fastest]) / ms[default] if ms[default] > 0 else 0.0
            features = node_features(probe["signature"], None, None)
            outputs = probe["signature"]["outputs"]
            priced_probes.append(Probe(outputs[0] if outputs else [], default, fastest, saving,
                                       fastest if saving > error else None, {f: features[f] for f in SPLITS}))
        priced.append((operator, error, priced_probes))
    return priced


def _rule(operator: str, error: float, probes: list[Probe]) -> OperatorPreference:
    """What most probes prefer, or the split on one feature that fits more of them (each side
    taking what most of it prefers, at least :data:`MIN_SIDE` on each side)."""
    preferred, fits = Counter(p.prefers for p in probes).most_common(1)[0]
    rule = OperatorPreference(operator, error, probes, preferred, fits=fits)
    for feature in SPLITS:
        for threshold in sorted({p.shape[feature] for p in probes})[1:]:
            above = Counter(p.prefers for p in probes if p.shape[feature] >= threshold)
            below = Counter(p.prefers for p in probes if p.shape[feature] < threshold)
            if min(above.total(), below.total()) < MIN_SIDE:
                continue
            (above_pair, above_fits), (below_pair, below_fits) = above.most_common(1)[0], below.most_common(1)[0]
            if above_pair != below_pair and above_fits + below_fits > rule.fits:
                rule = OperatorPreference(operator, error, probes, above_pair, Split(feature, threshold), below_pair,
                                          above_fits + below_fits)
    return rule


def preferences(table: CostTable, name: str = "the table") -> list[OperatorPreference]:
    if not table.probes:
        raise UsageError(f"{name} has no probes (nodes measured in several representations) to ask what it "
                         "prefers; fit one from `layoutbench calibrate` runs, which measure each node in several")
    return [_rule(operator, error, probes) for operator, error, probes in _priced(table)]
