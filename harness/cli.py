"""The ``layoutbench`` command line.

stdout carries only the result (table, JSON or CSV) so it can be piped; progress, logs and
whatever the libraries print go to stderr. ExecuTorch's and torch's warnings are silenced
unless ``--verbose``. Exit codes: 0 done, 1 a measurement failed (its record says why) or
the gate found a regression, 2 the command was wrong (one line says what to change).
"""

import argparse
import gc
import json
import os
import signal
import sys

from harness import quiet
from harness.cache import ENTRY_KINDS
from harness.results.schema import default_thresholds
from strategies.gpu_costs import COSTS_ENV

PROGRAM = "layoutbench"


def _whole_number(minimum: int):
    """An argparse type: a whole number of at least ``minimum``."""

    def parse(text: str) -> int:
        if not text.isdigit() or int(text) < minimum:
            raise argparse.ArgumentTypeError(f"expected a whole number >= {minimum}, not {text!r}")
        return int(text)

    return parse


_positive = _whole_number(1)
_count = _whole_number(0)


def _gibibytes(text: str) -> int:
    try:
        size = float(text)
    except ValueError:
        size = 0
    if size <= 0:
        raise argparse.ArgumentTypeError(f"expected a size in GiB > 0, not {text!r}")
    return int(size * (1 << 30))


def _add_sweep_arguments(command, required: bool) -> None:
    chosen = command.add_mutually_exclusive_group(required=required)
    chosen.add_argument("--models", help="comma-separated models: zoo names, timm:<name>, <name>.unfused, "
                        "<name>.int8, package.module:factory, file.py:factory, or a .pt2 saved with "
                        "torch.export.save")
    chosen.add_argument("--zoo", help="a zoo: quick, quick-int8 or full (see list zoos)")
    command.add_argument("--strategies", default="all",
                         help="comma-separated names, package.module:Class, file.py:Class, or all")
    command.add_argument("--target", default="vulkan",
                         help="comma-separated targets (default: vulkan; see list targets). Strategies apply to "
                         "the Vulkan targets; Arm targets measure their backend's own passes, with no strategy")
    command.add_argument("--out", default="results", help="results directory (JSON Lines, resumable)")
    command.add_argument("--columns", help="table columns: all, or a comma list of record fields "
                         "(default: the headline metrics of each target; json and csv carry every field)")
    command.add_argument("--fresh", action="store_true", help="re-run what the results directory already has")
    _add_no_wait_argument(command)
    workers = command.add_argument_group("workers", "each model is measured in a worker process; a crash or a "
                                          "limit there is a failed record, and the sweep goes on")
    workers.add_argument("--workers", type=_count, default=None,
                         help="models measured at once on this machine (default: its cores; 0: in this process); "
                         "one more worker reads its model's cached lowering meanwhile, unless programs are run")
    workers.add_argument("--ray", nargs="?", const="local", metavar="ADDRESS",
                         help="run on a Ray cluster: its address (ray://host:10001, or auto), or none for Ray's "
                         "default ($RAY_ADDRESS, else a new cluster on this machine)")
    workers.add_argument("--time-limit", type=_positive, metavar="SECONDS", help="per model and worker")
    workers.add_argument("--memory-limit", type=_gibibytes, metavar="GIB",
                         help="resident memory per worker (its children included); on Ray, also what a task "
                         "reserves (default 4)")
    command.add_argument("--costs", metavar="FILE", help="a device's GPU cost table (from calibrate): every Vulkan "
                         "record predicts its GPU time (predicted_gpu_ms), and ilp-time minimises it "
                         "(default: $LAYOUTBENCH_COSTS)")
    _add_runtime_arguments(command.add_argument_group("vulkan-run", "running the programs (--target vulkan-run)"))


def _add_no_wait_argument(command) -> None:
    command.add_argument("--no-wait", action="store_true",
                         help="stop (exit 2) if another command is writing --out, instead of waiting for it")


def _add_runtime_arguments(group) -> None:
    group.add_argument("--et-runner", help="executor_runner built with Vulkan (and the event tracer, for its latency "
                       "and GPU times); default: $LAYOUTBENCH_ET_RUNNER, executor_runner on PATH, the cache's "
                       "runtime/, else ExecuTorch pybindings if they have VulkanBackend")
    group.add_argument("--warmup", type=_positive, default=1, help="untimed inferences first (default 1)")
    group.add_argument("--iterations", type=_positive, default=10, help="timed inferences (default 10)")
    group.add_argument("--processes", type=_positive, default=3,
                       help="runtime processes per program, where the runtime times itself (ETDump): the record "
                            "is the fastest one's (default 3)")


def _add_gate_arguments(command, required: bool) -> None:
    gate = command.add_argument_group("regression gate", "judging a candidate results directory")
    gate.add_argument("--baseline", required=required, help="results directory of the reference (e.g. main)")
    gate.add_argument("--candidate", required=required, help="results directory of the change under test")
    gate.add_argument("--threshold", default=default_thresholds(),
                      help="allowed growth per metric, absolute or %% of the baseline (default: %(default)s)")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROGRAM,
        description="Compare tensor layout strategies of ExecuTorch backends on a model zoo.",
    )
    parser.add_argument("--verbose", action="store_true", help="show library warnings and logs")
    commands = parser.add_subparsers(dest="command", required=True)

    listing = commands.add_parser("list", help="list models, zoos, strategies or targets")
    listing.add_argument("what", choices=("models", "zoos", "strategies", "targets"))
    listing.add_argument("--zoo", help="only the models of this zoo")

    run = commands.add_parser("run", help="measure models x strategies on targets into a results directory")
    _add_sweep_arguments(run, required=True)
    run.add_argument("--format", choices=("table", "json", "csv"), default="table")

    gate = commands.add_parser("gate", help="judge a candidate results directory against a baseline; "
                               "exit 1 when a metric got worse past its threshold")
    _add_gate_arguments(gate, required=True)
    gate.add_argument("--format", choices=("table", "json", "csv"), default="table")

    compare = commands.add_parser(
        "compare", help="run (with --models/--zoo) or gate (with --baseline/--candidate); kept for scripts",
        description="With --models/--zoo: the same as run. With --baseline/--candidate: the same as gate.",
    )
    _add_sweep_arguments(compare, required=False)
    _add_gate_arguments(compare, required=False)
    compare.add_argument("--format", choices=("table", "json", "csv"), default="table")

    explain = commands.add_parser("explain", help="why each transition of one strategy exists")
    explain.add_argument("model")
    explain.add_argument("--strategy", required=True)
    explain.add_argument("--vs", help="a second strategy: where the two disagree")
    explain.add_argument("--format", choices=("table", "json"), default="table")
    explain.add_argument("--graph", help="also draw the delegated graph to this file (.svg, .png or .pdf)")

    profile = commands.add_parser(
        "profile", help="where one strategy's program spends GPU time (ET-VK ETDump), per operator and "
        "representation; with --vs, what another strategy's choices change")
    profile.add_argument("model")
    profile.add_argument("--strategy", required=True)
    profile.add_argument("--vs", help="a second strategy to compare with")
    profile.add_argument("--out", default="results", help="results directory the runs are kept in (reused "
                         "while nothing changed; default: %(default)s)")
    profile.add_argument("--fresh", action="store_true", help="run again even if the results directory has the runs")
    profile.add_argument("--recorded", action="store_true", help="profile the runs --out already holds (e.g. "
                         "another machine's, from import-remote); run nothing")
    _add_no_wait_argument(profile)
    profile.add_argument("--chart", help="bar chart file (default: OUT/profile-MODEL-STRATEGY[-vs-OTHER].png)")
    profile.add_argument("--top", type=_positive, default=10, help="dispatches in the top list (default 10)")
    profile.add_argument("--format", choices=("table", "json"), default="table")
    _add_runtime_arguments(profile)
    profile.add_argument("--workers", type=_count, default=None, help="as for run (0: in this process)")
    profile.set_defaults(ray=None, time_limit=None, memory_limit=None)  # run's other worker options, unset

    costs = commands.add_parser(
        "costs", help="GPU time per output element of each operator in each representation, from the ETDumps of "
        "vulkan-run results; several results directories (runs of one sweep) give the spread between runs")
    costs.add_argument("results", nargs="+", help="results directories written by run --target vulkan-run")
    costs.add_argument("--out", help="also write the table here (.csv, or .json)")
    costs.add_argument("--format", choices=("table", "json", "csv"), default="table")

    calibrate = commands.add_parser(
        "calibrate", help="measure what each node costs in each representation on this machine's Vulkan device "
        "(a few assignments per model that together cover them) and fit a cost table for --costs and ilp-time")
    _add_sweep_arguments(calibrate, required=False)
    calibrate.add_argument("--rounds", type=_positive, default=6,
                           help="calibration assignments per model (default %(default)s, at most 8)")
    calibrate.add_argument("--fit", nargs="+", metavar="RESULTS",
                           help="fit from these results directories instead (runs of one device, e.g. "
                           "import-remote's); no program is run")
    calibrate.add_argument("--table", help="the cost table to write (default: OUT/costs.json)")
    calibrate.set_defaults(strategies="", target="vulkan-run")

    remote = commands.add_parser(
        "import-remote", help="records of programs run on another machine by harness/targets/vulkan/remote.py")
    remote.add_argument("results", help="the results directory (vulkan-run) whose programs were run there")
    remote.add_argument("archive", help="the tar remote.py wrote")
    remote.add_argument("--out", required=True, help="results directory for that machine's records")
    remote.add_argument("--format", choices=("table", "json", "csv"), default="table")
    remote.add_argument("--columns", help="table columns, as for run")

    report = commands.add_parser("report", help="an HTML and Markdown report of a results directory")
    report.add_argument("results", help="results directory written by run")
    report.add_argument("--out", help="HTML file to write (default: RESULTS/report.html; Markdown beside it)")

    cache = commands.add_parser("cache", help="where the caches are, their entries and size; --clear empties them")
    cache.add_argument("--clear", nargs="*", metavar="KIND",
                       help="empty these kinds of cache (all when none is named)")
    cache.add_argument("--unused-for", type=_count, metavar="DAYS",
                       help="with --clear: remove only the entries no run has used for DAYS days "
                            f"(of {', '.join(ENTRY_KINDS)})")
    cache.add_argument("--format", choices=("table", "json"), default="table")

    runtime = commands.add_parser(
        "runtime", help="which ExecuTorch runtime vulkan-run would use, and why; runtime build: build an "
        "executor_runner with Vulkan into the cache, where vulkan-run, profile and asv find it with no flag")
    runtime.add_argument("action", nargs="?", choices=("build",), help="build (or reuse) the runner")
    runtime.add_argument("--source", help="build: an ExecuTorch source tree with its submodules (default: a "
                         "shallow clone of the tag of the installed executorch; needs internet)")
    runtime.add_argument("--cmake-arg", action="append", default=[], metavar="-DNAME=VALUE",
                         help="build: a CMake flag added to the runner's, written --cmake-arg=-DNAME=VALUE "
                         "(repeatable; part of the cache key)")
    runtime.add_argument("--rebuild", action="store_true", help="build: compile again (incremental) even if "
                         "the cache has this runner")
    runtime.add_argument("--jobs", type=_positive, help="build: compile jobs (default: the machine's cores)")
    runtime.add_argument("--et-runner", help="report: as for run, to see what a flag would pick")

    dashboard = commands.add_parser(
        "dashboard", help="make an asv publish output work offline (scripts fetched via npm, not CDNs)")
    dashboard.add_argument("html", nargs="?", default=".asv/html", help="asv's html_dir (default: %(default)s)")
    return parser


def _explain(args) -> int:
    import models
    import strategies
    from harness.inspection.explain import compare_strategies, transitions_table
    from harness.pipeline.model import ModelPipeline
    from harness.pipeline.measure import output_to_stderr
    from harness.targets.vulkan import validator

    models.resolve_models(args.model)
    names = [args.strategy] + ([args.vs] if args.vs else [])
    classes = [strategies.get_strategy(name) for name in names]
    print(f"{PROGRAM}: lowering {args.model}", file=sys.stderr)
    with output_to_stderr():
        lowering = ModelPipeline(args.model).vulkan_lowering
        lowered = [lowering.lower(cls) for cls in classes]
        for program in lowered:
            validator.validate(program)
    table = transitions_table(lowered[0])
    result = {"model": args.model, "strategy": args.strategy, "transitions": table}
    if args.vs:
        differing, only_one = compare_strategies(lowered[0], lowered[1], (args.strategy, args.vs))
        result.update(vs=args.vs, vs_transitions=len(transitions_table(lowered[1])),
                      differing_nodes=differing, transitions_only_in_one=only_one)
    if args.graph:
        from harness.inspection.graph_view import write

        path = write(lowered[0], f"{args.model} / {args.strategy}", args.graph)
        print(f"{PROGRAM}: graph written to {path}", file=sys.stderr)
    print(_render_explanation(result, args.format))
    return 0


def _tables_json(result: dict) -> str:
    """A result whose values may be DataFrames, as JSON (each frame a list of rows)."""
    import pandas as pd

    return json.dumps(
        {k: v.to_dict(orient="records") if isinstance(v, pd.DataFrame) else v for k, v in result.items()},
        indent=1, default=str,
    )


def _render_explanation(result: dict, output_format: str) -> str:
    if output_format == "json":
        return _tables_json(result)
    table = result["transitions"]
    lines = [
        f"{result['model']} / {result['strategy']}: {len(table)} transitions "
        f"({int(table['forced'].sum())} forced by the reader's registration, the rest follow the strategy's "
        "own choices), "
        f"{int(table['bytes'].sum())} bytes",
        table.drop(columns=["partition"]).to_string(index=False) if len(table) else "(none)",
    ]
    if "vs" in result:
        differing, only_one = result["differing_nodes"], result["transitions_only_in_one"]
        lines += [
            "",
            f"{result['vs']}: {result['vs_transitions']} transitions; {len(differing)} nodes tagged differently:",
            differing.to_string(index=False) if len(differing) else "(none)",
            "",
            "transitions only one strategy has:",
            only_one[["only_in", "source", "before", "after", "consumer", "constraint"]].to_string(index=False)
            if len(only_one) else "(none)",
        ]
    return "\n".join(lines)


def _costs(args) -> int:
    from harness.errors import UsageError
    from harness.inspection.costs import cost_table, write
    from harness.results.table import format_number

    try:
        table = cost_table(args.results)
    except FileNotFoundError as error:
        raise UsageError(str(error)) from None
    if args.out:
        print(f"{PROGRAM}: cost table written to {write(table, args.out)}", file=sys.stderr)
    if args.format == "table":
        print(table.to_string(index=False, float_format=format_number))
    else:
        print(table.to_json(orient="records", indent=1) if args.format == "json" else table.to_csv(index=False))
    return 0


def _calibrate(args) -> int:
    from pathlib import Path

    from harness.errors import UsageError

    if not (args.fit or args.models or args.zoo):
        raise UsageError("say what to calibrate on (--models or --zoo), or which runs to fit (--fit RESULTS ...)")
    if args.fit and (args.models or args.zoo):
        raise UsageError("--fit fits runs already made; drop --models/--zoo")
    if not args.fit:
        _start_local_workers(args)
    import models
    import strategies
    from harness.inspection.costs import fit_cost_model, write_cost_model
    from strategies.calibration import MAX_ROUNDS, round_name

    if args.rounds > MAX_ROUNDS:
        raise UsageError(f"--rounds is at most {MAX_ROUNDS}")
    names = None
    if not args.fit:
        names = [round_name(n) for n in range(1, args.rounds + 1)]
        names += strategies.resolve_strategies(args.strategies) if args.strategies else []
        records = _sweep(args, models.resolve_models(args.models, args.zoo), names, ["vulkan-run"])
        if not any(r["status"] == "ok" for r in records):
            raise UsageError("no program ran, so there is nothing to fit (reasons above)")
    try:
        table = fit_cost_model(args.fit or [args.out], names)
    except FileNotFoundError as error:
        raise UsageError(str(error)) from None
    path = write_cost_model(table, args.table or Path(args.out) / "costs.json")
    print(f"{PROGRAM}: cost table of {table.device} written to {path}: {len(table.nodes)} node prices, "
          f"{len(table.operators)} (operator, representations) fits, {len(table.transitions)} transition fits",
          file=sys.stderr)
    print(path)
    return 0


def _import_remote(args) -> int:
    from harness.pipeline.remote_runs import import_remote

    records = import_remote(args.results, args.archive, args.out)
    print(_render(records, args.format, args.columns))
    failed = [r for r in records if r["status"] == "failed"]
    for record in failed:
        print(f"{PROGRAM}: {record['model']} / {record['strategy']}: {record['reason']}", file=sys.stderr)
    print(f"{PROGRAM}: {len(records)} records of {records[0]['environment']['vulkan_device']} in {args.out}",
          file=sys.stderr)
    return 1 if failed else 0


def _report(args) -> int:
    from harness.results.report import write_report

    html = write_report(args.results, args.out)
    print(f"{PROGRAM}: report written to {html} (Markdown: {html.with_suffix('.md')})", file=sys.stderr)
    print(html)
    return 0


def _dashboard(args) -> int:
    from harness.results.dashboard import vendor

    count = vendor(args.html)
    print(f"{PROGRAM}: {count} CDN references in {args.html} now point at local copies", file=sys.stderr)
    return 0


def _cache(args) -> int:
    import pandas as pd

    from harness.cache import KINDS, cache_root, clear, prune, usage
    from harness.errors import UsageError
    from harness.results.table import format_value

    if args.unused_for is not None and args.clear is None:
        raise UsageError("--unused-for says which entries --clear removes: add --clear [KIND ...]")
    if args.clear is not None:
        unknown = sorted(set(args.clear) - set(KINDS))
        if unknown:
            raise UsageError(f"unknown cache kind {', '.join(unknown)}; known: {', '.join(KINDS)}")
        if args.unused_for is None:
            clear(args.clear or list(KINDS))
            print(f"{PROGRAM}: cleared {', '.join(args.clear or KINDS)} in {cache_root()}", file=sys.stderr)
        else:
            tools = sorted(set(args.clear) - set(ENTRY_KINDS))
            if tools:
                raise UsageError(f"{', '.join(tools)}: tools, not entries; clear them whole, without --unused-for")
            kinds = args.clear or list(ENTRY_KINDS)
            removed, size = prune(kinds, args.unused_for)
            print(f"{PROGRAM}: removed {removed} entries ({format_value('pte_bytes', size)}) unused for "
                  f"{args.unused_for} days from {', '.join(kinds)} in {cache_root()}", file=sys.stderr)
    rows = usage()
    if args.format == "json":
        print(json.dumps({"root": str(cache_root()), "kinds": rows}, indent=1))
        return 0
    table = pd.DataFrame(rows).set_index("kind")
    table["bytes"] = table["bytes"].map(lambda size: format_value("pte_bytes", size))
    print(f"{cache_root()} ({format_value('pte_bytes', sum(r['bytes'] for r in rows))})")
    print(table[["entries", "bytes", "holds"]].to_string())
    return 0


def _runtime(args) -> int:
    from harness.errors import UsageError
    from harness.targets.vulkan import runtime_build

    if args.action == "build":
        if args.et_runner:
            raise UsageError("--et-runner names a runtime to report on; runtime build builds one: drop it")
        print(runtime_build.build(args.source, args.cmake_arg, args.rebuild, args.jobs))
        return 0
    if args.source or args.cmake_arg or args.rebuild or args.jobs:
        raise UsageError("--source, --cmake-arg, --rebuild and --jobs go with runtime build")
    text, found = runtime_build.report(args.et_runner)
    print(text)
    return 0 if found else 1


def _list(args) -> int:
    if args.what in ("models", "zoos"):
        import models

        names = (models.list_zoos() if args.what == "zoos"
                 else models.list_models(zoo=args.zoo) if args.zoo else models.list_models())
    elif args.what == "strategies":
        import strategies

        names = strategies.list_strategies()
    else:
        from harness.targets import list_targets

        names = list_targets()
    print("\n".join(names))
    return 0


class _RichProgress:
    """Sweep progress on stderr: a bar over model x strategy with the current stage; where
    stderr is not a terminal (a log file, CI), a line per finished record instead."""

    def __init__(self, total: int):
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        console = Console(stderr=True)
        self._lines = not console.is_terminal
        self._progress = Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            console=console, transient=False, disable=self._lines,
        )
        self._task = self._progress.add_task("starting", total=total)

    def __enter__(self):
        self._progress.__enter__()
        return self

    def __exit__(self, *exc):
        return self._progress.__exit__(*exc)

    def stage(self, text: str) -> None:
        self._progress.update(self._task, description=text)

    def advance(self, record: dict | None = None) -> None:
        self._progress.advance(self._task)
        if self._lines and record is not None:
            task = self._progress.tasks[0]
            what = f"{record['model']} / {record['strategy'] or record['target']}"
            print(f"{PROGRAM}: [{task.completed:.0f}/{task.total:.0f} {task.elapsed:.0f} s] {what}: {record['status']}",
                  file=sys.stderr, flush=True)


def _render(records: list[dict], output_format: str, columns: str | None) -> str:
    if output_format == "json":  # before importing pandas, which JSON does not need (a second)
        return json.dumps(records, indent=1, default=str)
    import pandas as pd

    from harness.results.table import render_table

    if output_format == "csv":
        return pd.DataFrame(records).to_csv(index=False)
    chosen = columns if columns in (None, "all") else [c.strip() for c in columns.split(",") if c.strip()]
    return render_table(records, chosen)


def _gate(args) -> int:
    from harness.results.gate import failures, judge, parse_thresholds
    from harness.results.table import format_number

    verdicts = judge(args.baseline, args.candidate, parse_thresholds(args.threshold))
    failing = failures(verdicts)
    if args.format == "table":
        changed = verdicts[(verdicts["verdict"] != "ok") | (verdicts["delta"].fillna(0) != 0)]
        shown = changed.set_index(["model", "strategy", "target", "metric"]).dropna(axis=1, how="all")
        print(shown.to_string(float_format=format_number, na_rep="-") if len(shown) else "(no metric changed)")
        print(f"{PROGRAM}: {len(verdicts) - len(changed)} gated metrics unchanged", file=sys.stderr)
    else:
        print(verdicts.to_json(orient="records", indent=1) if args.format == "json" else verdicts.to_csv(index=False))
    for row in failing.itertuples():
        what = row.note if row.verdict == "missing" else (
            f"{row.metric} {format_number(row.baseline)} -> {format_number(row.candidate)} (threshold {row.threshold})")
        print(f"{PROGRAM}: worse: {row.model} / {row.strategy} / {row.target}: {what}", file=sys.stderr)
    verdict = f"gate failed: {len(failing)} regressions" if len(failing) else "gate passed"
    print(f"{PROGRAM}: {verdict} ({args.candidate} vs {args.baseline})", file=sys.stderr)
    return 1 if len(failing) else 0


def _sweep(args, model_names: list[str], strategy_names: list[str], targets: list[str]) -> list[dict]:
    """Measure (or reuse) models x strategies x targets into ``--out`` with a progress bar;
    the records, in plan order, and one line saying what failed, was skipped and was reused."""
    from pathlib import Path

    from harness.pipeline.sweep import run_sweep, strategies_for
    from harness.pipeline.workers import Execution
    from harness.results.store import RecordStore, key, latest
    from harness.targets import MeasureContext, RunSettings

    plan = [(m, s, t) for t in targets for m in model_names for s in strategies_for(t, strategy_names)]
    store = RecordStore(args.out)
    context = MeasureContext(Path(args.out).resolve(), args.et_runner,
                             RunSettings(warmup=args.warmup, iterations=args.iterations,
                                         processes=args.processes))
    execution = Execution(args.workers, args.ray, args.time_limit, args.memory_limit)
    measured = reused = skipped = 0
    with store.writing(wait=not args.no_wait), _RichProgress(len(plan)) as progress:
        for target in targets:
            sweep = run_sweep(model_names, strategy_names, target, store, progress, fresh=args.fresh,
                              context=context, execution=execution)
            measured, reused = measured + len(sweep.measured), reused + len(sweep.reused)
            skipped += len(sweep.skipped)
        records = latest(store.read())  # before another command's sweep can add to them

    order = {entry: i for i, entry in enumerate(plan)}
    records = sorted((r for r in records if key(r) in order), key=lambda r: order[key(r)])
    reasons: dict = {}
    for record in records:
        if record["status"] == "failed":
            place = (record["model"], record["target"], record["reason"])
            reasons.setdefault(place, []).append(record["strategy"] or record["target"])
    for (model, _, reason), which in reasons.items():
        print(f"{PROGRAM}: {model} / {', '.join(which)}: {reason}", file=sys.stderr)
    for reason in sorted({r["reason"] for r in records if r["status"] == "skipped"}):
        print(f"{PROGRAM}: skipped: {reason}", file=sys.stderr)
    unrun = f", {skipped} skipped before measuring" if skipped else ""
    print(f"{PROGRAM}: {len(records)} records in {store.path}: {measured} measured, {reused} reused "
          f"(same identity: model, strategy and harness code, tool versions){unrun}", file=sys.stderr)
    return records


def _start_local_workers(args) -> None:
    """Start the local workers' fork server before this process's own heavy imports, so
    both import at once (see :mod:`harness.pipeline.fork_server`)."""
    if args.workers != 0 and args.ray is None:
        from harness.pipeline import fork_server

        fork_server.start_early()


def _run(args) -> int:
    _start_local_workers(args)
    import models
    import strategies
    from harness.targets import resolve_targets

    records = _sweep(args, models.resolve_models(args.models, args.zoo),
                     strategies.resolve_strategies(args.strategies), resolve_targets(args.target))
    print(_render(records, args.format, args.columns))
    return 1 if any(r["status"] == "failed" for r in records) else 0


def _profile(args) -> int:
    _start_local_workers(args)
    from pathlib import Path

    import models
    import strategies
    from harness.errors import UsageError
    from harness.inspection import profile
    from harness.targets.vulkan.targets import program_dispatches, program_path

    model = models.resolve_models(args.model)[0]
    names = [args.strategy] + ([args.vs] if args.vs else [])
    strategies.resolve_strategies(",".join(names))
    records = _recorded_runs(args.out, model, names) if args.recorded else _sweep(args, [model], names, ["vulkan-run"])
    frames, runs = {}, {}
    for record in records:
        if record["status"] != "ok":
            raise UsageError(f"{model} / {record['strategy']} on vulkan-run is {record['status']}: "
                             f"{record['reason']}")
        pte = program_path(Path(args.out), model, record["strategy"])
        if not pte.with_suffix(".etdump").exists():
            raise UsageError(f"{pte.with_suffix('.etdump')} is missing (the runtime wrote no ETDump, or it was "
                             "deleted): build executor_runner with -DEXECUTORCH_ENABLE_EVENT_TRACER=ON, or re-run "
                             "with --fresh")
        frames[record["strategy"]] = program_dispatches(pte)
        runs[record["strategy"]] = record
    first = frames[args.strategy]
    result = {"model": model, "strategy": args.strategy, "summary": profile.summary(first, runs[args.strategy]),
              "operators": profile.by_operator(first), "representations": profile.by_representation(first),
              "top_dispatches": profile.top_dispatches(first, args.top)}
    if args.vs:
        result.update(vs=args.vs, vs_summary=profile.summary(frames[args.vs], runs[args.vs]),
                      **profile.versus(first, frames[args.vs], (args.strategy, args.vs)))
    chart = Path(args.chart or Path(args.out) / f"profile-{model}-{'-vs-'.join(names)}.png".replace(":", "."))
    profile.chart(frames, f"{model}: GPU time per operator", chart)
    print(f"{PROGRAM}: chart written to {chart}", file=sys.stderr)
    print(_render_profile(result, args.format))
    return 0


def _recorded_runs(results: str, model: str, names: list[str]) -> list[dict]:
    """The latest vulkan-run record of each strategy in a results directory (another
    machine's runs, as import-remote wrote them), nothing run."""
    from harness.errors import UsageError
    from harness.results.store import RecordStore, latest

    found = {r["strategy"]: r for r in latest(RecordStore(results).read())
             if r["model"] == model and r["target"] == "vulkan-run" and r["strategy"] in names}
    missing = [name for name in names if name not in found]
    if missing:
        raise UsageError(f"{results} has no vulkan-run record of {model} / {', '.join(missing)}; drop --recorded "
                         "to run it here")
    return [found[name] for name in names]


def _render_profile(result: dict, output_format: str) -> str:
    import pandas as pd

    from harness.results.table import format_number

    if output_format == "json":
        return _tables_json(result)

    def headline(strategy: str, summary: dict) -> str:
        return (f"{strategy}: {summary['latency_ms_median']:.3f} ms per inference (p10 "
                f"{summary['latency_ms_p10']:.3f}, p90 {summary['latency_ms_p90']:.3f}; {summary['latency_source']}), "
                f"load {summary['load_ms']:.1f} ms; {summary['gpu_dispatch_ms']:.3f} ms of GPU dispatches per "
                f"inference ({summary['dispatches']} dispatches); {summary['transitions']} transitions "
                f"{summary['transition_gpu_ms']:.3f} ms = {100 * (summary['transition_time_share'] or 0):.2f} %")

    def table(frame: pd.DataFrame) -> str:
        return frame.to_string(index=False, float_format=format_number) if len(frame) else "(none)"

    lines = [f"{result['model']} / {headline(result['strategy'], result['summary'])}", "",
             "GPU time per operator:", table(result["operators"]), "",
             "per operator and representation (inputs -> output):", table(result["representations"]), "",
             "top dispatches:", table(result["top_dispatches"])]
    if "vs" in result:
        lines += ["", headline(result["vs"], result["vs_summary"]), "",
                  f"per operator, {result['strategy']} -> {result['vs']} (delta > 0: slower under {result['vs']}):",
                  table(result["operator_changes"]), "",
                  f"nodes {result['vs']} represents differently ({result['representation_changes_ms']:+.3f} ms "
                  "in all):", table(result["node_changes"])]
    return "\n".join(lines)


def _compare(args) -> int:
    from harness.errors import UsageError

    judging = args.baseline or args.candidate
    if judging and (args.models or args.zoo):
        raise UsageError("--baseline/--candidate compare recorded results; drop --models/--zoo")
    if judging:
        if not (args.baseline and args.candidate):
            raise UsageError("--baseline and --candidate go together")
        return _gate(args)
    if not (args.models or args.zoo):
        raise UsageError("say what to run (--models or --zoo), or what to judge (--baseline and --candidate)")
    return _run(args)


COMMANDS = {"list": _list, "run": _run, "gate": _gate, "compare": _compare, "explain": _explain,
            "profile": _profile, "costs": _costs, "calibrate": _calibrate, "import-remote": _import_remote,
            "report": _report, "cache": _cache, "runtime": _runtime, "dashboard": _dashboard}


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if getattr(args, "costs", None):
        # Through the environment, so that every worker (local, forked, or on Ray) prices with it.
        os.environ[COSTS_ENV] = os.path.abspath(args.costs)
    signal.signal(signal.SIGTERM, _interrupt)  # a kill ends the workers and keeps finished records, as Ctrl-C does
    quiet.apply(args.verbose)
    from harness.errors import LayoutbenchError, MeasurementError

    try:
        return COMMANDS[args.command](args)
    except MeasurementError as error:
        print(f"{PROGRAM}: failed: {error}", file=sys.stderr)
        return 1
    except LayoutbenchError as error:
        print(f"{PROGRAM}: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{PROGRAM}: interrupted; finished records are kept, re-run to resume", file=sys.stderr)
        return 130


def console() -> None:
    """The ``layoutbench`` executable: :func:`main`, then an exit without the interpreter's
    last garbage collection, which walks every object of torch and ExecuTorch (about a
    second) only to free memory the ending process gives back anyway. Objects are still
    released as their modules are torn down; only cyclic garbage is left to the exit."""
    code = main()
    gc.freeze()
    sys.exit(code)


if __name__ == "__main__":
    console()
