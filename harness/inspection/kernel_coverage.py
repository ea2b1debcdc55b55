"""Which kernel families (:mod:`costmodel.kernel_families`) a set of models spends its predicted
GPU time in, and whether a cost table's corpus measured them at those sizes.

Each model is lowered (its cached lowering prefix) with one strategy and every node and
transition priced under the table, and placed inside or outside the table's support
(:mod:`costmodel.support`, the rule records use). Per (family, representations) the catalog's
side is its share of all the models' predicted time, its largest share of any one model's, the
part outside the support, its nodes and the range of three measures: log2 of its work
(multiply-adds where it has them, else elements moved), of its channels (a convolution's
input channels per group, else the output's channels) and of its output's spatial extent
(height x width). The corpus side is the nodes the table was fitted on (``calibrate
--nodes``'s file) and the same ranges. ``coverage`` says ``none`` (the family never measured),
``outside`` (all its catalog time outside the support), ``partly`` or ``inside``, and a family is
flagged where its time outside the support is ``FLAG_SHARE`` or more of some model's.

Priced nodes are kept per model (with the strategy and the table's digest) in a JSON Lines
file beside the output, so an interrupted run resumes and a second reads them back; families
are named anew from the kept signatures each time.
"""

import json
import math
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

import pandas as pd

from costmodel.features import node_features
from costmodel.kernel_families import kernel_family
from costmodel.support import NEVER_MEASURED
from costmodel.table import CostTable
from harness.errors import UsageError

FLAG_SHARE = 0.01
MEASURES = ("log2_work", "log2_channels", "log2_spatial")
KEY = ["family", "representation"]
RUNS_COLUMN = "runs on ET-VK (lavapipe)"


def node_measures(signature: dict, input_repr: str | None, output_repr: str | None, transition: bool) -> dict:
    """A node's family, representations and :data:`MEASURES`."""
    features = node_features(signature, input_repr, output_repr, transition=transition)
    per_group = features["log_in_channels"] - features["log_groups"]
    channels = per_group if features["log_in_channels"] else features["log_output_c"]
    return {"family": kernel_family(signature, input_repr, output_repr),
            "representation": f"{input_repr or '-'} -> {output_repr}", "log2_work": features["log_work"],
            "log2_channels": channels, "log2_spatial": features["log_output_h"] + features["log_output_w"]}


def priced_queries(lowered, table: CostTable) -> Iterator[tuple]:
    """Every operator node and transition of a lowered program, as the strategy left it, as
    (partition index, node, operator, query, price under ``table``): a transition as the node
    whose output it copies."""
    from harness.targets.vulkan.compile.metrics import assignments

    for index, assignment in enumerate(assignments(lowered)):
        queries = assignment.problem.queries(list(assignment.operator_reprs()), assignment.clones)
        for query, (name, operator, price) in zip(queries, assignment.priced(table)):
            yield index, name, operator, query, price


def priced_nodes(lowered, table: CostTable) -> list[dict]:
    """:func:`priced_queries` with their signature, representations, price (ms) and why they lie
    outside the table's support (None where inside or measured)."""
    return [{"signature": query.signature, "input": query.input or None, "output": query.output,
             "transition": query.transition, "ms": price.ms,
             "outside": None if price.measured else table.support.place(query)[1]}
            for *_, query, price in priced_queries(lowered, table)]


def lowered_program(model: str, strategy: str, table: CostTable):
    """``model`` lowered (from its cached lowering prefix, where there is one) with ``strategy``
    pricing with ``table``."""
    import strategies
    from harness.pipeline.model import pipeline
    from harness.quiet import output_to_stderr
    from harness.targets.vulkan.compile.prefix import vulkan_lowering

    with output_to_stderr():
        return vulkan_lowering(pipeline(model)).lower(strategies.get_strategy(strategy), table)


def lower_and_price(model: str, strategy: str, table: CostTable, cached_only: bool) -> list[dict] | None:
    """:func:`priced_nodes` of ``model`` lowered with ``strategy``; None where ``cached_only``
    and its lowering prefix is not in the cache."""
    from harness.targets.vulkan.compile.prefix import LOWERING_PREFIX

    if cached_only and not LOWERING_PREFIX.cache.path(LOWERING_PREFIX.key(model)).exists():
        return None
    return priced_nodes(lowered_program(model, strategy, table), table)


class PricedNodesFile:
    """The priced nodes of each model so far, one JSON line per (model, strategy, table digest)."""

    def __init__(self, path: Path):
        self.path = Path(path)

    def read(self) -> dict:
        if not self.path.exists():
            return {}
        entries = (json.loads(line) for line in self.path.read_text().splitlines() if line.strip())
        return {(e["model"], e["strategy"], e["table"]): e["nodes"] for e in entries}

    def append(self, model: str, strategy: str, table: str, nodes: list[dict]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a") as out:
            out.write(json.dumps({"model": model, "strategy": strategy, "table": table, "nodes": nodes}) + "\n")


def catalog_nodes(models: Iterable[str], strategy: str, table: CostTable, kept: PricedNodesFile,
                  cached_only: bool = False, price=lower_and_price) -> tuple[pd.DataFrame, list[str]]:
    """Every priced node of ``models`` (kept ones read back, others priced and kept), with
    :func:`node_measures`; and the models left out for want of a cached lowering prefix."""
    done, frames, skipped = kept.read(), [], []
    models = list(models)
    for number, model in enumerate(models, 1):
        nodes = done.get((model, strategy, table.digest))
        source = "kept"
        if nodes is None:
            nodes, source = price(model, strategy, table, cached_only), "priced"
            if nodes is None:
                skipped.append(model)
                print(f"[{number}/{len(models)}] {model}: no cached lowering prefix, left out", file=sys.stderr)
                continue
            kept.append(model, strategy, table.digest, nodes)
        frame = measured(nodes).assign(model=model)
        print(f"[{number}/{len(models)}] {model}: {len(frame)} nodes, {frame['ms'].sum():.3f} ms predicted ({source})",
              file=sys.stderr)
        frames.append(frame)
    return pd.concat(frames, ignore_index=True) if frames else measured([]).assign(model=[], ms=[]), skipped


def measured(nodes: Iterable[dict]) -> pd.DataFrame:
    """Nodes (signature, input, output, transition, and any other fields) with their measures."""
    rows = [{**node_measures(n["signature"], n["input"], n["output"], n["transition"]),
             **{k: v for k, v in n.items() if k not in ("signature", "input", "output", "transition")}} for n in nodes]
    return pd.DataFrame(rows) if rows else pd.DataFrame(columns=[*KEY, *MEASURES])


def corpus_nodes(path: Path) -> pd.DataFrame:
    """The nodes a cost table's corpus measured (``calibrate --nodes``'s file), with their measures."""
    from costmodel.measurements import read_measurements

    nodes = read_measurements(path).nodes
    return measured({"signature": row.signature, "input": row.input, "output": row.output,
                     "transition": bool(row.transition), "model": row.model} for row in nodes.itertuples())


def _ranges(frame: pd.DataFrame, prefix: str) -> pd.DataFrame:
    grouped = frame.groupby(KEY)
    ranges = {f"{prefix}_{m}_{end}": getattr(grouped[m], end)() for m in MEASURES for end in ("min", "max")}
    return pd.DataFrame({f"{prefix}_nodes": grouped.size(), **ranges})


def coverage_table(catalog: pd.DataFrame, corpus: pd.DataFrame) -> pd.DataFrame:
    """Per (family, representation) of the catalog's nodes: its time shares (all of it, and the
    part of its nodes outside the table's support), its and the corpus's nodes and ranges, its
    coverage and whether it is flagged; largest share first."""
    corpus_ranges = _ranges(corpus, "corpus")
    nodes = catalog.join(corpus_ranges, on=KEY)
    nodes["outside_ms"] = nodes["ms"].where(nodes["outside"].notna(), 0)
    nodes["unmeasured"] = nodes["outside"].fillna("").str.endswith(NEVER_MEASURED)
    model_ms = catalog.groupby("model")["ms"].sum()
    per_model = nodes.groupby([*KEY, "model"])[["ms", "outside_ms"]].sum()
    shares = per_model.div(model_ms.reindex(per_model.index.get_level_values("model")).to_numpy(), axis=0)
    grouped = nodes.groupby(KEY)
    table = pd.DataFrame({"share": grouped["ms"].sum() / model_ms.sum(),
                          "outside_share": grouped["outside_ms"].sum() / model_ms.sum(),
                          "max_model_share": shares["ms"].groupby(level=KEY).max(),
                          "max_model_outside_share": shares["outside_ms"].groupby(level=KEY).max(),
                          "max_share_model": shares["ms"].groupby(level=KEY).idxmax().map(lambda key: key[-1])})
    table = table.join(_ranges(catalog, "catalog")).join(corpus_ranges)
    table["corpus_nodes"] = table["corpus_nodes"].fillna(0).astype(int)
    outside = table["outside_share"] / table["share"].where(table["share"] > 0)
    table["coverage"] = ["none" if never else "inside" if part == 0 else "outside" if part >= 1 else "partly"
                         for never, part in zip(grouped["unmeasured"].all(), outside.fillna(0))]
    table["flagged"] = table["max_model_outside_share"] >= FLAG_SHARE
    return table.sort_values("share", ascending=False).reset_index()


def render(table: pd.DataFrame) -> str:
    """The coverage table as text: one line per (family, representation), ranges as min..max."""
    def span(row, side, measure):
        low, high = row[f"{side}_{measure}_min"], row[f"{side}_{measure}_max"]
        return "-" if math.isnan(low) else f"{low:.1f}..{high:.1f}"

    lines = pd.DataFrame({
        "family": table["family"], "representation": table["representation"],
        "share %": (100 * table["share"]).round(2), "max model %": (100 * table["max_model_share"]).round(2),
        "outside, max model %": (100 * table["max_model_outside_share"]).round(2),
        "nodes": table["catalog_nodes"], "corpus nodes": table["corpus_nodes"],
        **{f"{m.removeprefix('log2_')} (catalog | corpus)": [f"{span(r, 'catalog', m)} | {span(r, 'corpus', m)}"
                                                            for _, r in table.iterrows()] for m in MEASURES},
        "coverage": table["coverage"], "flagged": table["flagged"].map({True: "FLAG", False: ""}),
    })
    return lines.to_string(index=False)


def catalog_models(path: Path) -> list[str]:
    """The models of a catalog CSV (``docs/timm-catalog/time.csv``) that run on ET-VK."""
    try:
        catalog = pd.read_csv(path)
        return catalog.loc[catalog[RUNS_COLUMN].str.startswith("yes"), "model"].tolist()
    except (OSError, KeyError, pd.errors.ParserError) as error:
        raise UsageError(f"{path} is no catalog CSV with columns model and {RUNS_COLUMN!r} ({error}): name one "
                         "with --catalog, or '' for none") from None


def corpus_path(table: str, nodes: str | None) -> Path:
    """The corpus file named, else the one beside the table (``h100.json``: ``h100-nodes.jsonl.gz``)."""
    path = Path(nodes) if nodes else Path(table).with_name(f"{Path(table).stem}-nodes.jsonl.gz")
    if not path.is_file():
        raise UsageError(f"{path} does not exist: name the table's corpus (calibrate --nodes's file) with --nodes")
    return path
