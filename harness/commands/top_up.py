"""``calibrate --top-up MODEL``: a device's cost table topped up for one model whose nodes lie
outside its support. The model's programs are priced under the table; the top-up rounds that
cover what lies outside are lowered and run here (or packed for a device elsewhere, then folded
in with ``--fit``); their measurements are folded into the table (the model's own win, and with
``--corpus`` the fit is made anew), and the programs priced again, before beside after."""

from pathlib import Path

from costmodel.measurements import read_measurements, write_measurements
from costmodel.table import save
from harness.commands import say
from harness.commands.sweeps import device_time, start_local_workers, sweep, time_taken
from harness.commands.upkeep import pack_programs
from harness.errors import UsageError
from harness.results.results_dir import ResultsDir
from harness.results.store import RecordStore
from harness.results.table import format_number
from harness.sweep import table_check
from layoutkit.reference_strategies import BASELINE_STRATEGY

COMPARED = f"{BASELINE_STRATEGY},ilp-time"  # the strategies a user compares: what a top-up serves by default


def add_top_up_arguments(calibrate) -> None:
    calibrate.add_argument("--top-up", metavar="MODEL", help="top up the --costs table for MODEL: lower the few "
                           "programs that measure its nodes outside the table's support, run them (or --pack them; "
                           "then --fit their runs) and write the table with them folded in; MODEL's --strategies "
                           f"(default {COMPARED}) are priced before and after")
    calibrate.add_argument("--corpus", metavar="NODES", help="with --top-up: the table's corpus (calibrate --nodes's "
                           "file): its fit is made anew from it and MODEL's measurements, so its support grows")


def top_up(args) -> int:
    if args.models or args.zoo or args.prior or args.validate:
        raise UsageError("--top-up lowers its own programs for one model: drop --models/--zoo/--prior/--validate")
    if not args.costs:
        raise UsageError("--top-up tops up a cost table: name it with --costs TABLE")
    if args.pack and args.fit:
        raise UsageError("--pack packs the top-up's programs for a device elsewhere; --fit folds in their runs "
                         "afterwards: use one of them")
    if not args.fit:
        start_local_workers(args)
    import models
    import strategies
    from harness.inspection.top_up import priced_programs, top_up_plan
    from strategies.calibration import top_up_round_name

    chosen = models.resolve_models(args.top_up)
    if len(chosen) != 1:
        raise UsageError(f"--top-up tops a table up for one model, not {len(chosen)}: run it once for each")
    model = chosen[0]
    names = strategies.resolve_strategies(args.strategies or COMPARED)
    table = table_check.load_checked(args.costs)
    if table.support is None:
        raise UsageError(f"{args.costs} states no support, so nothing can be said to lie outside it: fit it with "
                         "this layoutbench (calibrate --fit NODES) first")
    corpus = read_measurements(Path(args.corpus)) if args.corpus else None
    measurements = _measured(args, model, table) if args.fit else None
    before = priced_programs(model, names, table)
    outside = before.outside()
    if not outside:
        raise UsageError(f"nothing to top up: {table.name} prices {model}'s programs ({', '.join(names)}) "
                         "inside its support")
    summary = before.summary(table)
    say(f"{model} under {args.costs}: up to {summary['outside_nodes'].max()} nodes and "
        f"{summary['outside_share'].max():.1%} of a program's predicted time outside the support, in "
        + ", ".join(f"{family} ({ms:.3f} ms)" for family, ms in sorted(outside.items(), key=lambda item: -item[1])))
    if not args.fit:
        plan = top_up_plan(before, table)
        if not plan.rounds:
            raise UsageError(f"nothing to top up: what {model}'s programs spend outside the support is in "
                             "transitions, which no round measures apart")
        rounds = plan.rounds
        say(f"{rounds} top-up program{'s' * (rounds > 1)} measure{'s' * (rounds == 1)} {plan.covered} of the "
            f"{plan.outside} node x representation pairs outside the support, {plan.used_covered} of the {plan.used} "
            f"that {', '.join(names)} hold")
        if args.pack:
            args.warmup = args.iterations = args.processes = 1  # only outputs matter here: the device times them
        records = sweep(args, [model], [top_up_round_name(n) for n in range(1, rounds + 1)], ["vulkan-run"])
        say(time_taken(records, ran=not args.pack))
        if args.pack:
            corpus_option = f" --corpus {args.corpus}" if args.corpus else ""
            return pack_programs(args, records, f"calibrate --top-up {args.top_up} --costs {args.costs} --fit "
                                 f"DEVICE_RUNS{corpus_option} --out {args.out}")
        if not any(r["status"] == "ok" for r in records):
            raise UsageError("no top-up program ran, so there is nothing to fold in (reasons above)")
        measurements = _measured(args, model, table)
    return _fold(args, model, names, table, corpus, before, measurements)


def _measured(args, model: str, table):
    """What the top-up's runs (``--fit``'s, else ``--out``'s) measured of ``model``, of the table's device."""
    from harness.targets.vulkan.local.measured_nodes import load_measurements

    measurements = load_measurements(args.fit or [args.out], args.as_device).of_models([model])
    if measurements.nodes.empty:
        raise UsageError(f"the runs measured no node of {model}: fold in the top-up's own runs")
    if measurements.device != table.device:
        raise UsageError(f"the runs are of {measurements.device}, the table of {table.device}: where the one "
                         f"runs ET-VK as the other does, add --as-device \"{table.device}\"")
    if args.fit:
        records = [r for path in args.fit if Path(path).is_dir() for r in RecordStore(path).read()
                   if r["model"] == model]
        say(f"{len(measurements.programs)} programs of {model} to fold in, run {device_time(records)}")
    return measurements


def _fold(args, model: str, names: list[str], table, corpus, before, measurements) -> int:
    """The runs folded into ``table``, the new table written and the programs priced again."""
    from costmodel.fit import topped_up
    from harness.inspection.top_up import priced_programs

    if args.nodes:
        say(f"measured nodes kept in {write_measurements(measurements, args.nodes)}")
    new = topped_up(table, measurements, corpus)
    path = Path(args.table) if args.table else ResultsDir(args.out).cost_table
    save(new, path)
    added = new.nodes.keys() - table.nodes.keys()
    replaced = sum(new.nodes[key] != table.nodes[key] for key in new.nodes.keys() & table.nodes.keys())
    grown = sorted(f for f, ranges in new.support.ranges.items() if ranges != table.support.ranges.get(f))
    refit = (f"its fit made anew from {args.corpus} and the {len(measurements.programs)} programs; support grown in "
             f"{', '.join(grown) or 'no family'}" if corpus is not None else "its fit kept")
    measured_on = f" (measured on {', '.join(measurements.measured_on)})" if measurements.measured_on else ""
    say(f"{path}: {table.name} with {len(added)} node prices of {model}{measured_on} added and {replaced} replaced by "
        f"its own; {refit}")
    after = priced_programs(model, names, new).summary(new)
    print(before.summary(table).merge(after, on="strategy", suffixes=("_before", "_after")).to_string(
        index=False, float_format=format_number))
    return 0
