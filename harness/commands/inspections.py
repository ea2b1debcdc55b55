"""The commands that look inside a strategy's result or a device's costs: explain, profile, costs and
preferences."""


from harness.commands import say
from harness.commands.sweeps import start_local_workers, sweep


def explain(args) -> int:
    import models
    import strategies
    from harness.inspection.explain import explain, render_explanation

    models.resolve_models(args.model)
    strategies.resolve_strategies(",".join([args.strategy] + ([args.vs] if args.vs else [])))
    say(f"lowering {args.model}")
    result, lowered = explain(args.model, args.strategy, args.vs)
    if args.graph:
        from harness.inspection.graph_view import write

        path = write(lowered[0], f"{args.model} / {args.strategy}", args.graph)
        say(f"graph written to {path}")
    print(render_explanation(result, args.format))
    return 0


def costs(args) -> int:
    from harness.errors import UsageError
    from harness.inspection.costs import cost_table, write
    from harness.results.table import format_number

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
    from harness.results.results_dir import ResultsDir

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
    from costmodel.table import load
    from harness.inspection.preferences import render_preferences

    tables = {}
    for path in args.tables:
        table = load(path)
        tables[path] = table, preferences(table, path)
    print(render_preferences(tables, args.format))
    return 0
