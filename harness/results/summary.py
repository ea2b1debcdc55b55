"""What a sweep over many models found, in a few tables (the report's summary, and the figures
docs/catalog.md quotes for the timm catalog). How far each model got is read from what its records hold:
``input_shapes`` once it was built, ``export_seconds`` once exported, ``partitions`` once lowered.
Strategies are compared on the models where every one of them is ``ok``, so sums are like for like.
"""

import pandas as pd

from layoutkit.reference_strategies import BASELINE_STRATEGY, OPTIMUM_STRATEGY


def _has(records: pd.DataFrame, column: str) -> pd.Series:
    return records[column].notna() if column in records else pd.Series(False, index=records.index)


def stages(records: pd.DataFrame) -> pd.Series:
    """How many models were built, exported, lowered, lowered to one partition, and measured
    ok by every strategy."""
    lowered = _has(records, "partitions")
    by_model = records.assign(**{
        "built": _has(records, "input_shapes") | lowered, "exported": _has(records, "export_seconds") | lowered,
        "lowered": lowered, "one partition": records.get("partitions", pd.Series(dtype=float)).eq(1),
        "ok": records["status"].eq("ok"),
    }).groupby("model")
    reached = {stage: int(by_model[stage].any().sum()) for stage in ("built", "exported", "lowered", "one partition")}
    return pd.Series({"models": by_model.ngroups, **reached, "every strategy ok": int(by_model["ok"].all().sum())},
                     name="models")


def failure_reasons(records: pd.DataFrame, top: int = 12) -> pd.DataFrame:
    """The commonest reasons a model failed (one count per model), shortened to their first clause."""
    failed = records[records["status"] == "failed"].copy()
    failed["reason"] = (failed["reason"].str.replace(r"0x[0-9a-f]+", "0x...", regex=True)  # object addresses differ
                        .str.replace(r"\s+", " ", regex=True).str.slice(0, 110))
    counts = failed.drop_duplicates(["model", "reason"]).groupby("reason")["model"].agg(["count", "first"])
    return counts.sort_values("count", ascending=False).head(top).rename(columns={"first": "e.g."})


# What strategies are compared on: columns of the comparable records even where no record has them
# (every record failed before the pass, say), so that a summary of them is empty, not an error (and
# the summaries below need not ask whether a record has them).
_COMPARED = ("transitions", "optimal", "pass_seconds")


def comparable(records: pd.DataFrame) -> pd.DataFrame:
    """The ok records of the models where every strategy that measured anything is ok."""
    ok = records[records["status"] == "ok"].reindex(columns=records.columns.union(_COMPARED, sort=False))
    strategies = ok["strategy"].nunique()
    complete = ok.groupby("model")["strategy"].nunique().eq(strategies)
    return ok[ok["model"].isin(complete[complete].index)]


def per_strategy(records: pd.DataFrame) -> pd.DataFrame:
    """Per strategy, on the comparable models: transitions summed, models above the optimum
    (where the ILP proved it) and the largest excess, pass time summed."""
    both = comparable(records)
    transitions = both.pivot_table(index="model", columns="strategy", values="transitions", aggfunc="first")
    table = pd.DataFrame({"models": transitions.count(), "transitions": transitions.sum()})
    if OPTIMUM_STRATEGY in transitions:
        proven = both[(both["strategy"] == OPTIMUM_STRATEGY) & both["optimal"].eq(True)]
        optimum = transitions.loc[transitions.index.isin(proven["model"])]
        excess = optimum.sub(optimum[OPTIMUM_STRATEGY], axis=0)
        table["above optimum"] = (excess > 0).sum()
        table["largest excess"] = excess.max()
    table["pass seconds"] = both.pivot_table(index="model", columns="strategy", values="pass_seconds").sum()
    return table.sort_values("transitions")


def above_optimum(records: pd.DataFrame, strategy: str) -> pd.DataFrame:
    """Models where ``strategy`` inserts more transitions than the proven optimum, both numbers."""
    both = comparable(records)
    if not {strategy, OPTIMUM_STRATEGY} <= set(both["strategy"]):
        return pd.DataFrame(columns=[strategy, OPTIMUM_STRATEGY])
    proven = both[(both["strategy"] == OPTIMUM_STRATEGY) & both["optimal"].eq(True)]["model"]
    table = both.pivot_table(index="model", columns="strategy", values="transitions", aggfunc="first")
    # reindexed: a strategy whose every ok record lacks transitions is a column of gaps, not none
    table = table.reindex(columns=[strategy, OPTIMUM_STRATEGY]).loc[table.index.isin(proven)]
    return table[table[strategy] > table[OPTIMUM_STRATEGY]].astype(int).sort_values(strategy, ascending=False)


def extremes(records: pd.DataFrame) -> pd.DataFrame:
    """The slowest ILP solve, and for each strategy its largest pass-time ratio to the baseline."""
    rows = []
    ilp = records[(records["strategy"] == OPTIMUM_STRATEGY) & _has(records, "solve_seconds")]
    if len(ilp):
        slowest = ilp.loc[ilp["solve_seconds"].idxmax()]
        rows.append({"what": "slowest ILP solve", "model": slowest["model"],
                     "value": f"{slowest['solve_seconds']:.3g} s ({slowest['variables']:,.0f} variables, "
                              f"{'optimal' if slowest['optimal'] else 'not proven optimal'})"})
    both = comparable(records)
    times = both.pivot_table(index="model", columns="strategy", values="pass_seconds")
    if BASELINE_STRATEGY in times:
        for strategy in (s for s in times.columns if s != BASELINE_STRATEGY):
            ratio = times[strategy] / times[BASELINE_STRATEGY]
            model = ratio.idxmax()
            rows.append({"what": f"largest pass time {strategy} / {BASELINE_STRATEGY}", "model": model,
                         "value": f"{ratio[model]:.3g}x ({times.at[model, strategy] * 1000:.3g} ms vs "
                                  f"{times.at[model, BASELINE_STRATEGY] * 1000:.3g} ms)"})
    return pd.DataFrame(rows, columns=["what", "model", "value"])
