"""The ``explore`` command, its arguments beside it: Model Explorer overlays of one strategy's
choices and times (and where a second differs), written into the results directory and
shown in Model Explorer with ExecuTorch's extension on a local port."""

from harness.commands import say
from harness.commands.option_types import add_costs_argument, add_model_and_strategies, port
from harness.inspection.explorer_server import DEFAULT_PORT, LAST_PORT, free_port, require, serve
from harness.sweep import table_check


def add_parser(commands) -> None:
    explore = commands.add_parser(
        "explore", help="Model Explorer overlays of a strategy's representations, transitions and GPU times (and "
        "where --vs differs) on the model's graph, opened on a local port")
    add_model_and_strategies(explore, "a second strategy: overlays of where and by how much it differs")
    add_costs_argument(explore, "predicted time per node, its interval and nodes outside the table's support")
    explore.add_argument("--out", default="results", help="results directory: measured time from its vulkan-run "
                         "records; the files go to OUT/explorer/MODEL/ (default: %(default)s)")
    explore.add_argument("--port", type=port, default=DEFAULT_PORT, help="local port (default: %(default)s, or the "
                         f"next free one up to {LAST_PORT})")
    explore.add_argument("--no-browser", action="store_true", help="print the address, open no browser tab")
    explore.add_argument("--write-only", action="store_true", help="write the files, start no server")


def explore(args) -> int:
    import models
    import strategies

    if not args.write_only:  # said before the minutes of lowering, not after
        require()
        served_port = free_port(args.port)
    model = models.resolve_models(args.model)[0]
    names = [args.strategy] + ([args.vs] if args.vs else [])
    strategies.resolve_strategies(",".join(names))
    from harness.inspection.explore import explore as write

    table = table_check.load_checked(args.costs) if args.costs else None
    if table is None:
        say("no --costs: no predicted time")
    say(f"lowering {model} and drawing its edge program")
    explored = write(model, names, table, args.out)
    for line in explored.predicted:
        say(line)
    for name in explored.unmeasured:
        say(f"no vulkan-run of {model} / {name} with an ETDump in {args.out}: no measured time")
    if explored.undrawn:
        say(f"{len(explored.undrawn)} nodes ET-VK added that read only weights are not drawn")
    print("\n".join(str(path) for path in [explored.etrecord, *explored.overlays]))
    if not args.write_only:
        serve(explored.etrecord, explored.overlays, served_port, open_browser=not args.no_browser)
    return 0
