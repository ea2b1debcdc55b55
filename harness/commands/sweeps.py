"""The commands that sweep or judge a sweep: run, compare and gate (calibrate's own: fitting.py)."""

import copy
from pathlib import Path

from harness.commands import say
from harness.commands.output import SweepProgress, check_columns, render_records
from harness.errors import UsageError
from harness.results.results_dir import ResultsDir
from harness.results.store import RecordStore
from harness.results.table import format_number
from harness.sweep import table_check
from layoutkit.files import cache_folder


def gate(args) -> int:
    from harness.results.gate import ALLOW_INCOMPARABLE, failures, judge, parse_thresholds

    verdicts = judge(args.baseline, args.candidate, parse_thresholds(args.threshold), args.allow_incomparable)
    failing = failures(verdicts)
    if args.format == "table":
        changed = verdicts[(verdicts["verdict"] != "ok") | (verdicts["delta"].fillna(0) != 0)]
        shown = changed.set_index(["model", "strategy", "target", "metric"]).dropna(axis=1, how="all")
        print(shown.to_string(float_format=format_number, na_rep="-") if len(shown) else "(no metric changed)")
        say(f"{len(verdicts) - len(changed)} gated metrics unchanged")
    else:
        print(verdicts.to_json(orient="records", indent=1) if args.format == "json" else verdicts.to_csv(index=False))
    uncompared = verdicts[verdicts["verdict"] == "uncompared"]
    for row in uncompared.itertuples():
        say(f"not compared: {row.model} / {row.strategy} / {row.target}: {row.note}")
    for row in failing.itertuples():
        what = row.note if row.verdict == "missing" else (
            f"{row.metric} {format_number(row.baseline)} -> {format_number(row.candidate)} (threshold {row.threshold})"
            + (f"; {row.note}" if isinstance(row.note, str) else ""))
        say(f"{row.verdict}: {row.model} / {row.strategy} / {row.target}: {what}")
    verdict = f"gate failed: {len(failing)} regressions" if len(failing) else "gate passed"
    judged = [f"{args.candidate} vs {args.baseline}"]
    if len(uncompared):
        judged.append(f"{len(uncompared)} records not compared")
    across = verdicts["note"].str.contains(ALLOW_INCOMPARABLE, regex=False, na=False).sum()
    if across:
        judged.append(f"{across} values measured on different devices, precisions or cost tables, compared by "
                      f"{ALLOW_INCOMPARABLE}")
    say(f"{verdict} ({'; '.join(judged)})")
    return 1 if len(failing) else 0


def sweep(args, model_names: list[str], strategy_names: list[str], targets: list[str]) -> list[dict]:
    """Measure (or reuse) models x strategies x targets into ``--out`` with a progress bar;
    the records, in plan order, and one line saying what failed, was skipped and was reused."""
    from harness.sweep.execution import Execution
    from harness.sweep.planning import run_sweep
    from harness.targets import HostSettings, MeasureContext, RunSettings

    cache_folder()  # a cache others could write is refused before the results directory is made
    table = table_check.load_checked(args.costs) if args.costs else None  # before anything is made or started
    store = RecordStore(args.out)
    context = MeasureContext(Path(args.out).resolve(), args.et_runner,
                             RunSettings(warmup=args.warmup, iterations=args.iterations, processes=args.processes),
                             table, HostSettings.from_environment(args.environment))
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
        say(f"{model} / {', '.join(which)}: {reason}")
    for reason in sorted({r["reason"] for r in records if r["status"] == "skipped"}):
        say(f"skipped: {reason}")
    unrun = f", {len(done.skipped)} skipped before measuring" if done.skipped else ""
    say(f"{len(records)} records in {store.path}: {len(done.measured)} measured, {len(done.reused)} "
        f"reused (same identity: model, strategy and harness code, tool versions){unrun}")
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
    if on_a_device(args):
        if set(targets) - {"vulkan", "vulkan-run"}:
            raise UsageError(f"--device runs Vulkan programs: drop --target {args.target}")
        _, made, records = run_made_on_device(
            args, lambda here: sweep(here, model_names, strategy_names, ["vulkan-run"]))
    else:
        made, records = [], sweep(args, model_names, strategy_names, targets)
    print(render_records(records, args.format, args.columns))
    return 1 if any(r["status"] == "failed" for r in made + records) else 0


def add_device_arguments(command) -> None:
    """The options of run and calibrate for a device reached by adb."""
    command.add_argument("--device", help="run the programs on a device reached by adb: adb (the only one attached) "
                         "or adb:SERIAL; each is made and checked against eager here first, the device's records go "
                         "into OUT/devices/SERIAL, and --et-runner names the device's runner")
    command.add_argument("--adb", metavar="PATH", help="with --device: the adb to use (default: adb on PATH)")


def on_a_device(args) -> bool:
    """Whether ``--device`` runs the programs elsewhere (``--adb`` without it refused)."""
    if args.adb and not args.device:
        raise UsageError("--adb names the adb of --device: add --device adb")
    return bool(args.device)


def run_made_on_device(args, make) -> tuple[Path, list[dict], list[dict]]:
    """``--device``: the programs ``make(here)`` makes here, ``here`` being ``args`` with run
    settings that run each once against eager (untimed, with this machine's runtime), then run
    on the device with ``args``' run settings, their records imported. The device's results
    directory, the records made here and the device's."""
    from harness.targets import RunSettings
    from harness.targets.vulkan.local import adb_device

    adb = adb_device.connect(args.device, args.adb)
    runner = adb_device.device_runner(args.et_runner)
    here = copy.copy(args)
    here.et_runner, here.warmup, here.iterations, here.processes = None, 1, 1, 1
    made = make(here)
    if not any(r["status"] == "ok" for r in made):
        raise UsageError("no program was made and checked here, so none runs on the device (reasons above)")
    out = ResultsDir(args.out).device(adb.serial)
    records = adb_device.run_on_device(adb, Path(args.out), made, runner, RunSettings(
        warmup=args.warmup, iterations=args.iterations, processes=args.processes), out, say, args.fresh,
        wait=not args.no_wait)
    say(f"{len(records)} records of {adb.serial} in {out}")
    return out, made, records


def compare(args) -> int:
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


def time_taken(records: list[dict], ran: bool = True) -> str:
    """What lowering ``records``' programs took here (each model's export and prefix, or their
    loads from the cache, once; each program's pass, finish and serialization), and where they
    ``ran`` here, about how long the device ran them."""
    per_model = {r["model"]: sum(r.get(k) or 0 for k in ("export_seconds", "prefix_seconds", "prefix_load_seconds"))
                 for r in records}
    per_program = sum(r.get(k) or 0 for r in records for k in ("pass_seconds", "finish_seconds", "serialize_seconds"))
    running = f", running them {device_time(records)}" if ran else ""
    return f"lowering the {len(records)} programs took {sum(per_model.values()) + per_program:.0f} s here{running}"


def device_time(records: list[dict]) -> str:
    """About how long, and on which device, ``records``' programs ran: each runtime process's
    load, then its warm-up and timed inferences at the median latency."""
    seconds = 0.0
    for record in records:
        settings = (record.get("environment") or {}).get("run_settings") or {}
        inferences = settings.get("warmup", 0) + (record.get("iterations") or 0)
        seconds += settings.get("processes", 1) * ((record.get("load_ms") or 0) + inferences * (
            record.get("latency_ms_median") or 0)) / 1000
    devices = {(r.get("environment") or {}).get("vulkan_device") for r in records} - {None}
    return f"about {seconds:.0f} s on {', '.join(sorted(devices)) or 'no device'}"
