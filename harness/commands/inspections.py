"""The commands that look inside a strategy's result or a device's costs: explain, profile, costs,
coverage and preferences."""

from pathlib import Path

from costmodel.table import load
from harness.commands import say
from harness.commands.sweeps import start_local_workers, sweep
from harness.errors import UsageError
from harness.results.results_dir import ResultsDir
from harness.results.table import format_number
from harness.sweep import table_check


def explain(args) -> int:
    import models
    import strategies
    from harness.inspection.explain import explain, render_explanation

    models.resolve_models(args.model)
    strategies.resolve_strategies(",".join([args.strategy] + ([args.vs] if args.vs else [])))
    table = table_check.load_checked(args.costs) if args.costs else None
    say(f"lowering {args.model}")
    result, lowered = explain(args.model, args.strategy, args.vs, table)
    if args.graph:
        from harness.inspection.graph_view import write

        path = write(lowered[0], f"{args.model} / {args.strategy}", args.graph)
        say(f"graph written to {path}")
    print(render_explanation(result, args.format))
    return 0


def costs(args) -> int:
    from harness.inspection.costs import cost_table, write

    try:
        table = cost_table(args.results)
    except FileNotFoundError as error:
        raise UsageError(str(error)) from None
    if args.out:
        say(f"cost table written to {write(table, args.out)}")
    if args.format == "table":
        print(table.to_string(index=False, float_format=format_number))
    else:
        print(table.to_json(orient="records", indent=1) if args.format == "json" else table.to_csv(index=False))
    return 0


def profile(args) -> int:
    start_local_workers(args)
    import models
    import strategies
    from harness.inspection.profile import chart, profile_runs, recorded_runs, render_profile

    model = models.resolve_models(args.model)[0]
    names = [args.strategy] + ([args.vs] if args.vs else [])
    strategies.resolve_strategies(",".join(names))
    records = recorded_runs(args.out, model, names) if args.recorded else sweep(args, [model], names, ["vulkan-run"])
    result, frames = profile_runs(args.out, model, names, records, args.top)
    path = chart(frames, f"{model}: GPU time per operator", args.chart or ResultsDir(args.out).profile_chart(model, names))
    say(f"chart written to {path}")
    print(render_profile(result, args.format))
    return 0


def preferences(args) -> int:
    from costmodel.preferences import preferences
    from harness.inspection.preferences import render_preferences

    tables = {path: (table := load(path), preferences(table, path)) for path in args.tables}
    print(render_preferences(tables, args.format))
    return 0


def coverage(args) -> int:
    import models
    import strategies
    from harness.inspection.kernel_coverage import (
        PricedNodesFile, catalog_models, catalog_nodes, corpus_nodes, coverage_table, corpus_path, render)

    strategies.resolve_strategies(args.strategy)
    chosen = catalog_models(args.catalog) if args.catalog else []
    chosen += [m for m in models.resolve_models(args.models, None if args.models else args.zoo) if m not in chosen]
    table, corpus = load(args.costs), corpus_nodes(corpus_path(args.costs, args.nodes))
    if table.support is None:
        raise UsageError(f"{args.costs} states no support (a table not fitted from measured nodes): "
                         "name a fitted one, or fit it with calibrate --fit NODES")
    out = Path(args.out)
    nodes, left_out = catalog_nodes(chosen, args.strategy, table, PricedNodesFile(out.with_suffix(".nodes.jsonl")),
                                    args.cached_only)
    if nodes.empty:
        raise UsageError(f"none of the {len(chosen)} models has a cached lowering prefix: drop --cached-only")
    result = coverage_table(nodes, corpus)
    out.parent.mkdir(parents=True, exist_ok=True)
    result.to_csv(out, index=False)
    print(render(result))
    left = f"; {len(left_out)} left out, no cached lowering prefix: {', '.join(left_out)}" if left_out else ""
    say(f"{nodes['model'].nunique()} of {len(chosen)} models priced{left}; table written to {out}")
    return 0


def add_cost_parsers(commands) -> None:
    """The ``costs`` and ``coverage`` commands' options."""
    costs = commands.add_parser(
        "costs", help="GPU time per output element of each operator in each representation, from the ETDumps of "
        "vulkan-run results; several results directories (runs of one sweep) give the spread between runs")
    costs.add_argument("results", nargs="+", help="results directories written by run --target vulkan-run")
    costs.add_argument("--out", help="also write the table here (.csv, or .json)")
    costs.add_argument("--format", choices=("table", "json", "csv"), default="table")

    coverage = commands.add_parser("coverage", help="per kernel family and representation: the predicted GPU time "
                                   "of a catalog of models there, and whether the cost table's corpus measured it")
    coverage.add_argument("--catalog", default="docs/timm-catalog/time.csv", help="a catalog CSV (columns model and "
                          "'runs on ET-VK (lavapipe)'): its models that run; '' for none (default: %(default)s)")
    chosen = coverage.add_mutually_exclusive_group()
    chosen.add_argument("--models", help="comma-separated models besides the catalog's")
    chosen.add_argument("--zoo", default="quick", help="a zoo besides the catalog (default: %(default)s)")
    coverage.add_argument("--costs", default="docs/cost-table/h100.json", help="the cost table that prices the nodes "
                          "(default: %(default)s)")
    coverage.add_argument("--nodes", help="the table's corpus, as calibrate --nodes kept it (default: TABLE's "
                          "name with -nodes.jsonl.gz)")
    coverage.add_argument("--strategy", default="bfs-downstream", help="the strategy lowering each model")
    coverage.add_argument("--cached-only", action="store_true", help="leave out models whose lowering prefix is not "
                          "cached, rather than lower them (minutes each)")
    coverage.add_argument("--out", default="results/coverage.csv", help="the table as CSV; the priced nodes are kept "
                          "beside it (.nodes.jsonl) and read back by a re-run (default: %(default)s)")
