"""The commands that sweep or judge a sweep: run, compare, gate and calibrate."""

import os
import sys
import time
from pathlib import Path

from harness.commands import PROGRAM
from harness.commands.output import SweepProgress, check_columns, render_records


def gate(args) -> int:
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
            f"{row.metric} {format_number(row.baseline)} -> {format_number(row.candidate)} (threshold {row.threshold})"
            + (f"; {row.note}" if isinstance(row.note, str) else ""))
        print(f"{PROGRAM}: {row.verdict}: {row.model} / {row.strategy} / {row.target}: {what}", file=sys.stderr)
    verdict = f"gate failed: {len(failing)} regressions" if len(failing) else "gate passed"
    print(f"{PROGRAM}: {verdict} ({args.candidate} vs {args.baseline})", file=sys.stderr)
    return 1 if len(failing) else 0


def sweep(args, model_names: list[str], strategy_names: list[str], targets: list[str]) -> list[dict]:
    """Measure (or reuse) models x strategies x targets into ``--out`` with a progress bar;
    the records, in plan order, and one line saying what failed, was skipped and was reused."""
    from pathlib import Path

    from harness.results.store import RecordStore
    from harness.sweep.execution import Execution
    from harness.sweep import table_check
    from harness.sweep.planning import run_sweep
    from harness.targets import MeasureContext, RunSettings
    from layoutkit.files import cache_folder

    cache_folder()  # a cache others could write is refused before the results directory is made
    table = table_check.load_checked(args.costs) if args.costs else None  # before anything is made or started
    store = RecordStore(args.out)
    context = MeasureContext(Path(args.out).resolve(), args.et_runner,
                             RunSettings(warmup=args.warmup, iterations=args.iterations,
                                         processes=args.processes), table)
    execution = Execution(args.workers, args.ray, args.time_limit, args.memory_limit)
    with SweepProgress() as progress:
        done = run_sweep(model_names, strategy_names, targets, store, progress, fresh=args.fresh, context=context,
                         execution=execution, wait=not args.no_wait)
    records = done.records
    reasons: dict = {}
    for record in records:
        if record["status"] == "failed":
            place = (record["model"], record["target"], record["reason"])
            reasons.setdefault(place, []).append(record["strategy"] or record["target"])
    for (model, _, reason), which in reasons.items():
        print(f"{PROGRAM}: {model} / {', '.join(which)}: {reason}", file=sys.stderr)
    for reason in sorted({r["reason"] for r in records if r["status"] == "skipped"}):
        print(f"{PROGRAM}: skipped: {reason}", file=sys.stderr)
    unrun = f", {len(done.skipped)} skipped before measuring" if done.skipped else ""
    print(f"{PROGRAM}: {len(records)} records in {store.path}: {len(done.measured)} measured, {len(done.reused)} "
          f"reused (same identity: model, strategy and harness code, tool versions){unrun}", file=sys.stderr)
    return records


def start_local_workers(args) -> None:
    """Start the local workers' fork server before this process's own heavy imports, so
    both import at once (see :mod:`harness.sweep.fork_server`)."""
    if args.workers != 0 and args.ray is None:
        from harness.sweep import fork_server

        fork_server.start_early()


def run(args) -> int:
    start_local_workers(args)
    import models
    import strategies
    from harness.targets import resolve_targets

    model_names = models.resolve_models(args.models, args.zoo)
    strategy_names = strategies.resolve_strategies(args.strategies)
    targets = resolve_targets(args.target)
    check_columns(args.columns, strategy_names)  # a usage error measures nothing
    records = sweep(args, model_names, strategy_names, targets)
    print(render_records(records, args.format, args.columns))
    return 1 if any(r["status"] == "failed" for r in records) else 0


def compare(args) -> int:
    from harness.errors import UsageError

    judging = args.baseline or args.candidate
    if judging and (args.models or args.zoo):
        raise UsageError("--baseline/--candidate compare recorded results; drop --models/--zoo")
    if judging:
        if not (args.baseline and args.candidate):
            raise UsageError("--baseline and --candidate go together")
        return gate(args)
    if not (args.models or args.zoo):
        raise UsageError("say what to run (--models or --zoo), or what to judge (--baseline and --candidate)")
    return run(args)


def calibrate(args) -> int:
    from harness.errors import UsageError

    if not (args.fit or args.models or args.zoo):
        raise UsageError("say what to calibrate on (--models or --zoo), or which runs to fit (--fit RUNS ...)")
    if args.fit and (args.models or args.zoo):
        raise UsageError("--fit fits runs already made; drop --models/--zoo")
    if not args.fit:
        start_local_workers(args)
    import models
    import strategies
    from harness.inspection import calibration
    from harness.results.results_dir import ResultsDir
    from strategies.calibration import MAX_ROUNDS, round_name

    if args.rounds > MAX_ROUNDS:
        raise UsageError(f"--rounds is at most {MAX_ROUNDS}")
    if not args.fit:
        names = [round_name(n) for n in range(1, args.rounds + 1)]
        names += strategies.resolve_strategies(args.strategies) if args.strategies else []
        records = sweep(args, models.resolve_models(args.models, args.zoo), names, ["vulkan-run"])
        if not any(r["status"] == "ok" for r in records):
            raise UsageError("no program ran, so there is nothing to fit (reasons above)")
    measurements = calibration.load_measurements(args.fit or [args.out])
    if args.limits:  # a device's limits stated by hand (a phone's, read off its vulkaninfo) win over those read
        measurements.limits = args.limits
    if args.nodes:
        print(f"{PROGRAM}: measured nodes kept in {calibration.write_measurements(measurements, args.nodes)}",
              file=sys.stderr)
    if args.validate:
        return _validate(args, measurements)
    table = calibration.fit(measurements)
    path = ResultsDir(args.out).cost_table if not args.table else Path(args.table)
    _write_table(path, table)
    limits = f"; its limits {table.limits.to_json()}" if table.limits else "; no device limits (calibrate --limits)"
    print(f"{PROGRAM}: cost table of {table.device} written to {path}: {len(table.nodes)} node prices from "
          f"{table.corpus['programs']} programs of {len(table.corpus['models'])} models, and a fit{limits}",
          file=sys.stderr)
    print(path)
    return 0


def _write_table(path: Path, table) -> None:
    """Write ``table`` whole or not at all: a run starting meanwhile reads the old file or the new."""
    path.parent.mkdir(parents=True, exist_ok=True)
    written = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        written.write_bytes(table.to_bytes())
        os.replace(written, path)
    finally:
        written.unlink(missing_ok=True)


def _validate(args, measurements) -> int:
    """Leave one model out: the held-out tables, every program's prediction, and per model a
    summary; the fits in ``--workers`` processes at once (default: the machine's cores)."""
    from concurrent.futures import ProcessPoolExecutor

    from harness.inspection import calibration
    from harness.results.table import format_number
    from harness.sweep import fork_server

    out = Path(args.out)
    started = time.monotonic()

    def write(model, table, done, total):
        path = out / "held-out" / f"{model}.json"
        _write_table(path, table)
        print(f"{PROGRAM}: [{done}/{total} {time.monotonic() - started:.0f} s] table without {model}: {path}",
              file=sys.stderr)

    fits = measurements.programs["model"].nunique()
    workers = min((os.cpu_count() or 1) if args.workers is None else args.workers, fits)
    executor = ProcessPoolExecutor(workers, mp_context=fork_server.context()) if workers > 1 else None
    try:
        programs, tables = calibration.leave_one_model_out(measurements, fitted=write, executor=executor)
    except KeyboardInterrupt:
        if executor is not None:  # its processes ignore Ctrl-C (see fork_server): the fits in flight end now
            for process in list(executor._processes.values()):  # Python 3.14 names this kill_workers()
                process.kill()
        raise
    finally:
        if executor is not None:
            executor.shutdown(cancel_futures=True)
    programs.to_csv(out / "validation.csv", index=False)
    summary = calibration.validation_summary(programs)
    print(summary.to_string(index=False, float_format=format_number))
    print(f"{PROGRAM}: {len(tables)} held-out tables in {out / 'held-out'}, every program's prediction in "
          f"{out / 'validation.csv'}", file=sys.stderr)
    return 0
