"""The ``layoutbench`` command line.

stdout carries only the result (table, JSON or CSV) so it can be piped; progress and logs
go to stderr. ExecuTorch's and torch's warnings are silenced unless ``--verbose``.
"""

import argparse
import json
import logging
import os
import sys
import warnings

from harness.gate import DEFAULT_THRESHOLDS
from harness.records import format_number

PROGRAM = "layoutbench"
TABLE_COLUMNS = (
    "status",
    "transitions",
    "excess_transitions",
    "transition_bytes",
    "delegate_memory_bytes",
    "transition_memory_bytes",
    "partitions",
    "ops_outside_delegate",
    "pass_seconds",
    "optimal",
)
ARM_COLUMNS = (
    "tosa_ops", "transposes", "transpose_bytes", "reference_max_abs_error", "reference_seconds", "cycles",
    "inferences_per_second", "sram_bytes", "offchip_bytes", "transpose_cycle_share", "setup_seconds",
    "inference_seconds", "lowering_seconds",
)
RUN_COLUMNS = ("runtime", "latency_ms_median", "peak_rss_bytes", "max_abs_error", "transition_time_share")


def _quiet_libraries(verbose: bool) -> None:
    """Silence library chatter before those libraries are imported."""
    if verbose:
        logging.basicConfig(level=logging.INFO, stream=sys.stderr)
        return
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, not {text!r}")
    return int(text)


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

    compare = commands.add_parser(
        "compare", help="lower models with strategies and compare, or gate a candidate against a baseline",
        description="With --models/--zoo: lower and record. With --baseline/--candidate: compare two "
        "results directories and exit 1 when a metric got worse past its threshold.",
    )
    chosen = compare.add_mutually_exclusive_group()
    chosen.add_argument("--models", help="comma-separated model names (timm:<name>, <name>.unfused ...)")
    chosen.add_argument("--zoo", help="a zoo: quick or full")
    compare.add_argument("--strategies", default="all", help="comma-separated names, package.module:Class, or all")
    compare.add_argument("--target", default="vulkan",
                         help="comma-separated targets (default: vulkan; see list targets). Strategies apply to "
                         "the Vulkan targets; Arm targets record their backend's own passes as arm-backend")
    compare.add_argument("--out", default="results", help="results directory (JSON Lines, resumable)")
    compare.add_argument("--format", choices=("table", "json", "csv"), default="table")
    compare.add_argument("--fresh", action="store_true", help="re-run what the results directory already has")
    gate = compare.add_argument_group("regression gate", "judging a candidate results directory")
    gate.add_argument("--baseline", help="results directory of the reference (e.g. main)")
    gate.add_argument("--candidate", help="results directory of the change under test")
    gate.add_argument("--threshold", default=DEFAULT_THRESHOLDS,
                      help="allowed growth per metric, absolute or %% of the baseline (default: %(default)s)")
    running = compare.add_argument_group("vulkan-run", "running the programs (--target vulkan-run)")
    running.add_argument("--et-runner", help="executor_runner built with Vulkan (default: $LAYOUTBENCH_ET_RUNNER, "
                         "else ExecuTorch pybindings if they have VulkanBackend)")
    running.add_argument("--warmup", type=_positive, default=1, help="untimed inferences first (default 1)")
    running.add_argument("--iterations", type=_positive, default=10, help="timed inferences (default 10)")
    explain = commands.add_parser("explain", help="why each transition of one strategy exists")
    explain.add_argument("model")
    explain.add_argument("--strategy", required=True)
    explain.add_argument("--vs", help="a second strategy: where the two disagree")
    explain.add_argument("--format", choices=("table", "json"), default="table")
    explain.add_argument("--graph", help="also draw the delegated graph to this file (.svg, .png or .pdf)")

    report = commands.add_parser("report", help="an HTML and Markdown report of a results directory")
    report.add_argument("results", help="results directory written by compare")
    report.add_argument("--out", help="HTML file to write (default: RESULTS/report.html; Markdown beside it)")

    dashboard = commands.add_parser(
        "dashboard", help="make an asv publish output work offline (scripts fetched via npm, not CDNs)")
    dashboard.add_argument("html", nargs="?", default=".asv/html", help="asv's html_dir (default: %(default)s)")
    return parser


def _explain(args) -> int:
    import models
    import strategies
    from harness import validator
    from harness.explain import compare_strategies, transitions_table
    from harness.export_cache import export_model
    from harness.vulkan_lowering import VulkanLowering

    models.resolve_models(args.model)
    names = [args.strategy] + ([args.vs] if args.vs else [])
    classes = [strategies.get_strategy(name) for name in names]
    print(f"{PROGRAM}: lowering {args.model}", file=sys.stderr)
    lowering = VulkanLowering.from_exported(export_model(models.create(args.model)))
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
        from harness.graph_view import write

        path = write(lowered[0], f"{args.model} / {args.strategy}", args.graph)
        print(f"{PROGRAM}: graph written to {path}", file=sys.stderr)
    print(_render_explanation(result, args.format))
    return 0


def _render_explanation(result: dict, output_format: str) -> str:
    import pandas as pd

    if output_format == "json":
        return json.dumps(
            {k: v.to_dict(orient="records") if isinstance(v, pd.DataFrame) else v for k, v in result.items()},
            indent=1, default=str,
        )
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


def _report(args) -> int:
    from harness.report import write_report

    html = write_report(args.results, args.out)
    print(f"{PROGRAM}: report written to {html} (Markdown: {html.with_suffix('.md')})", file=sys.stderr)
    print(html)
    return 0


def _dashboard(args) -> int:
    from harness.dashboard import vendor

    count = vendor(args.html)
    print(f"{PROGRAM}: {count} CDN references in {args.html} now point at local copies", file=sys.stderr)
    return 0


def _list(args) -> int:
    import models
    import strategies
    from harness.sweep import TARGETS

    if args.what == "models":
        names = models.list_models(zoo=args.zoo) if args.zoo else models.list_models()
    elif args.what == "zoos":
        names = models.list_zoos()
    elif args.what == "strategies":
        names = strategies.list_strategies()
    else:
        names = list(TARGETS)
    print("\n".join(names))
    return 0


class _RichProgress:
    """Sweep progress on stderr: a bar over model x strategy with the current stage."""

    def __init__(self, total: int):
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._progress = Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            console=Console(stderr=True), transient=False,
        )
        self._task = self._progress.add_task("starting", total=total)

    def __enter__(self):
        self._progress.__enter__()
        return self

    def __exit__(self, *exc):
        return self._progress.__exit__(*exc)

    def stage(self, text: str) -> None:
        self._progress.update(self._task, description=text)

    def advance(self, steps: int = 1) -> None:
        self._progress.advance(self._task, steps)


def _render(records: list[dict], output_format: str) -> str:
    import pandas as pd

    from harness.records import with_excess

    if output_format == "json":
        return json.dumps(records, indent=1, default=str)
    frame = with_excess(pd.DataFrame(records))
    if output_format == "csv":
        return frame.to_csv(index=False)
    vulkan = frame["target"].str.startswith("vulkan").any()
    columns = [c for c in TABLE_COLUMNS if c in frame.columns and (vulkan or c == "status" or frame[c].notna().any())]
    columns += [c for c in (*RUN_COLUMNS, *ARM_COLUMNS) if c in frame.columns and frame[c].notna().any()]
    index = ["model", "strategy"] + (["target"] if frame["target"].nunique() > 1 else [])
    table = frame.set_index(index)[columns]
    if "optimal" in table:
        table["optimal"] = table["optimal"].astype(object).where(table["optimal"].notna(), "-")
    return table.to_string(float_format=format_number, na_rep="-")


def _gate(args) -> int:
    from harness.gate import failures, judge, parse_thresholds

    if not (args.baseline and args.candidate):
        raise _usage("--baseline and --candidate go together")
    if args.models or args.zoo:
        raise _usage("--baseline/--candidate compare recorded results; drop --models/--zoo")
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


def _usage(message: str):
    from harness.errors import LayoutbenchError

    return LayoutbenchError(message)


def _compare(args) -> int:
    if args.baseline or args.candidate:
        return _gate(args)
    if not (args.models or args.zoo):
        raise _usage("say what to run (--models or --zoo), or what to judge (--baseline and --candidate)")
    import models
    import strategies
    from harness.records import IDENTITY_KEYS, RecordStore, latest
    from harness.runners import RunSettings
    from harness.sweep import RunOptions, check_target, run_sweep, strategies_for

    model_names = models.resolve_models(args.models, args.zoo)
    strategy_names = strategies.resolve_strategies(args.strategies)
    targets = [check_target(t.strip()) for t in args.target.split(",") if t.strip()]
    plan = [(m, s, t) for t in targets for m in model_names for s in strategies_for(t, strategy_names)]
    store = RecordStore(args.out)
    with _RichProgress(len(plan)) as progress:
        options = RunOptions(args.et_runner, RunSettings(warmup=args.warmup, iterations=args.iterations))
        for target in targets:
            run_sweep(model_names, strategy_names, target, store, progress, fresh=args.fresh, run_options=options)

    order = {key: i for i, key in enumerate(plan)}
    records = [r for r in latest(store.read()) if tuple(r[k] for k in IDENTITY_KEYS) in order]
    records.sort(key=lambda r: order[tuple(r[k] for k in IDENTITY_KEYS)])
    print(_render(records, args.format))
    failed = [r for r in records if r["status"] == "failed"]
    for record in failed:
        print(f"{PROGRAM}: {record['model']} / {record['strategy']}: {record['reason']}", file=sys.stderr)
    skip_reasons = {r["reason"] for r in records if r["status"] == "skipped"}
    for reason in sorted(skip_reasons):
        print(f"{PROGRAM}: skipped: {reason}", file=sys.stderr)
    print(f"{PROGRAM}: {len(records)} records in {store.path}", file=sys.stderr)
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    _quiet_libraries(args.verbose)
    from harness.errors import LayoutbenchError

    try:
        command = {"list": _list, "compare": _compare, "explain": _explain, "report": _report,
                   "dashboard": _dashboard}[args.command]
        return command(args)
    except LayoutbenchError as error:
        print(f"{PROGRAM}: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{PROGRAM}: interrupted; finished records are kept, re-run to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
