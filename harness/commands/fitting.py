"""The ``calibrate`` command: a device's cost table fitted from runs (here, or made elsewhere),
left one model out at a time (``--validate``), or a new device's from a few programs (``--prior``,
``--budget``, ``--pack``, ``--device``): choosing them from another device's table, running them
(here or on a device over adb) or packing them, and keeping or transferring the prior."""

import os
import sys
import time
from pathlib import Path

from costmodel.measurements import read_measurements, write_measurements
from costmodel.table import save
from harness.commands import say
from harness.commands.option_types import positive
from harness.commands.sweeps import (add_device_arguments, on_a_device, run_made_on_device, start_local_workers, sweep,
                                     time_taken)
from harness.commands.top_up import top_up
from harness.commands.upkeep import pack_programs
from harness.errors import UsageError
from harness.results.results_dir import ResultsDir
from harness.results.table import format_number
from harness.sweep import fork_server, table_check


def calibrate(args) -> int:
    if on_a_device(args) and (not args.prior or args.fit or args.pack):
        raise UsageError("--device runs the programs --prior chooses on a device reached by adb and fits its table: "
                         "add --prior TABLE, drop --fit/--pack")
    if args.top_up:
        return top_up(args)
    if not (args.fit or args.models or args.zoo or args.prior):
        raise UsageError("say what to calibrate on (--models or --zoo, or --prior TABLE), or which runs to fit "
                         "(--fit RUNS ...)")
    if args.fit and (args.models or args.zoo):
        raise UsageError("--fit fits runs already made; drop --models/--zoo")
    if args.prior and (args.models or args.zoo or args.validate):
        raise UsageError("--prior chooses its own programs and fits from them; drop --models/--zoo/--validate")
    if args.pack and (not args.prior or args.fit):
        raise UsageError("--pack packs the programs --prior chooses, for a device elsewhere: add --prior TABLE, "
                         "drop --fit")
    if args.fp16 and (not args.prior or args.fit):
        raise UsageError("--fp16 runs the .fp16 variants of the programs --prior chooses: add --prior TABLE, drop "
                         "--fit (runs made elsewhere are fitted in the precision they ran in)")
    if not args.fit:
        start_local_workers(args)
    import models
    import strategies
    from costmodel.fit import fit
    from harness.targets.vulkan.local.measured_nodes import load_measurements
    from strategies.calibration import MAX_ROUNDS, round_name

    if args.rounds > MAX_ROUNDS:
        raise UsageError(f"--rounds is at most {MAX_ROUNDS}")
    prior = read_prior(args.prior) if args.prior else None
    runs = Path(args.out)  # where the runs fitted are, and the table goes
    if not args.fit:
        if prior is not None and args.device:
            runs, _, records = run_made_on_device(args, lambda here: _sweep_chosen(here, *prior))
        elif prior is not None:
            records = _sweep_chosen(args, *prior)
            if args.pack:
                return pack_programs(args, records, f"calibrate --fit DEVICE_RUNS --prior {args.prior}")
        else:
            names = [round_name(n) for n in range(1, args.rounds + 1)]
            names += strategies.resolve_strategies(args.strategies) if args.strategies else []
            records = sweep(args, models.resolve_models(args.models, args.zoo), names, ["vulkan-run"])
        if not any(r["status"] == "ok" for r in records):
            raise UsageError("no program ran, so there is nothing to fit (reasons above)")
    measurements = load_measurements(args.fit or [runs], args.as_device)
    if args.limits:  # a device's limits stated by hand (a phone's, read off its vulkaninfo) win over those read
        measurements.limits = args.limits
    if args.nodes:
        say(f"measured nodes kept in {write_measurements(measurements, args.nodes)}")
    if args.validate:
        return _validate(args, measurements)
    path = ResultsDir(runs).cost_table if not args.table else Path(args.table)
    if prior is not None:
        table = _transfer(args, prior[0], measurements)
        if table is None:
            return 0
    else:
        table = fit(measurements)
    save(table, path)
    limits = f"; its limits {table.limits.to_json()}" if table.limits else "; no device limits (calibrate --limits)"
    say(f"cost table of {table.device} written to {path}: {len(table.nodes)} node prices from "
        f"{table.corpus['programs']} programs of {len(table.corpus['models'])} models, and "
        f"{'the prior transferred' if prior is not None else 'a fit'}{limits}")
    print(path)
    return 0


def add_few_shot_arguments(calibrate) -> None:
    """calibrate's options for a new device from a few programs."""
    calibrate.add_argument("--prior", metavar="TABLE", help="a new device from a few programs: another device's "
                           "table (its kept nodes beside it, NAME-nodes.jsonl.gz) chooses --budget programs, runs "
                           "them (or --fit their runs) and keeps the prior where it holds, else transfers it")
    calibrate.add_argument("--budget", type=positive, default=10, help="programs --prior chooses (default %(default)s)")
    calibrate.add_argument("--fp16", action="store_true", help="with --prior: choose among the programs that have a "
                           ".fp16 variant and run those (ET-VK in half precision, as phones run), for an fp16 table")
    calibrate.add_argument("--pack", metavar="OUT", help="with --prior or --top-up, for a device elsewhere: run each "
                           "program here once (its outputs against eager, untimed) and pack them into OUT (a .tar, "
                           ".tar.gz or .tar.xz for remote_runner.py, else a bundle for run.sh); then import-remote and "
                           "--fit")
    add_device_arguments(calibrate)


def read_prior(path):
    """The ``--prior`` table at ``path`` (its fitted model built) and the measurements kept beside
    it (``NAME-nodes.jsonl.gz``)."""
    table = table_check.load_checked(path)
    nodes = Path(path).with_name(f"{Path(path).stem}-nodes.jsonl.gz")
    if not nodes.is_file():
        raise UsageError(f"--prior {path}: its measured nodes ({nodes}) are not beside it; they say which "
                         "programs the prior measured (calibrate --nodes keeps them)")
    return table, read_measurements(nodes)


def _sweep_chosen(args, prior, candidates) -> list[dict]:
    """Choose ``--budget`` programs for the new device and run them here: one sweep per set of
    strategies that several models share (with ``--pack``, each program once: only its outputs
    matter here)."""
    from costmodel.program_choice import choose_programs

    if args.pack:
        args.warmup = args.iterations = args.processes = 1
    variants = _half_precision_models(candidates.programs) if args.fp16 else None
    programs = zip(candidates.programs["model"], candidates.programs["strategy"])
    among = None if variants is None else [program for program in programs if program[0] in variants]
    chosen = choose_programs(candidates, prior, args.budget, among)
    if variants is not None:
        chosen["model"] = chosen["model"].map(variants)
    if len(chosen) < args.budget:
        held = " that have a .fp16 variant" if args.fp16 else ""
        say(f"--budget {args.budget} is more than the {len(chosen)} programs the prior's nodes hold{held}: "
            f"running all {len(chosen)}")
    print(chosen.to_string(index=False, float_format=format_number), file=sys.stderr)
    by_strategies: dict = {}
    for model, group in chosen.groupby("model", sort=False):
        by_strategies.setdefault(tuple(group["strategy"]), []).append(model)
    records = [record for names, chosen_models in by_strategies.items()
               for record in sweep(args, chosen_models, list(names), ["vulkan-run"])]
    say(time_taken(records, ran=not (args.pack or args.device)))
    return records


def _half_precision_models(programs) -> dict[str, str]:
    """``--fp16``: each model of the prior's programs that has a ``.fp16`` variant, and that
    variant (an int8 model has none; a prior fitted on ``.fp16`` programs holds them already)."""
    from models import FP16_SUFFIX, INT8_SUFFIX, half_precision

    return {model: model if half_precision(model) else model + FP16_SUFFIX
            for model in programs["model"].unique() if not model.endswith(INT8_SUFFIX)}


def _transfer(args, prior, measurements):
    """The new device's table from ``prior`` and ``measurements``; None where the prior holds
    there as it is (said in one line)."""
    from costmodel.fit import transferred
    from costmodel.transferred import prior_ratios
    from harness.inspection import few_shot

    ratios = prior_ratios(prior, measurements)  # every node priced once, for the check and the transfer
    if measurements.programs["model"].nunique() > 1:
        check = few_shot.prior_check(prior, measurements, ratios)
        verdict = "holds" if check.holds else "does not hold"
        say(f"the prior {verdict} on {measurements.device}: it predicts the "
            f"{len(measurements.programs)} programs within {check.prior_error:.1%} (median), a table transferred "
            f"without each one's model within {check.transferred_error:.1%}, the prior's spread "
            f"{check.spread:.1%}; measured/predicted {check.factor:.3f}")
        if check.holds:
            say(f"use {args.prior} on {measurements.device} as it is: no table written")
            print(args.prior)
            return None
        if check.transferred_error > few_shot.HOLDS_WITHIN:
            say(f"the table transferred from {len(measurements.programs)} programs is not to be trusted on "
                f"a model they do not include (beyond {few_shot.HOLDS_WITHIN:.0%}): a larger --budget teaches it "
                "more")
    return transferred(prior, measurements, ratios)


def _validate(args, measurements) -> int:
    """Leave one model out: the held-out tables, every program's prediction, and per model a
    summary; the fits in ``--workers`` processes at once (default: the machine's cores). The
    tables already written for the same measurements and fit are kept (see
    :mod:`harness.inspection.validation`), so an interrupted validation resumes."""
    from concurrent.futures import ProcessPoolExecutor

    from harness.inspection import validation

    out = ResultsDir(args.out)
    models = sorted(measurements.programs["model"].unique())
    key = validation.fit_key(measurements)
    kept = validation.kept_tables({model: out.held_out_table(model) for model in models}, key)
    say(f"{len(kept)} held-out tables kept (fitted from the same measurements by the same fit), "
        f"{len(models) - len(kept)} to fit")
    started, fitted = time.monotonic(), []

    def write(model, table, done, total):
        save(table, out.held_out_table(model))
        fitted.append(model)
        say(f"[{done}/{total} {time.monotonic() - started:.0f} s] table without {model}: {out.held_out_table(model)}")

    workers = min((os.cpu_count() or 1) if args.workers is None else args.workers, len(models) - len(kept))
    executor = ProcessPoolExecutor(workers, mp_context=fork_server.context()) if workers > 1 else None
    try:
        programs, tables = validation.leave_one_model_out(measurements, models, fitted=write, executor=executor,
                                                          kept=kept, key=key)
    except KeyboardInterrupt:
        if executor is not None:  # its processes ignore Ctrl-C (see fork_server): the fits in flight end now
            for process in list(executor._processes.values()):  # Python 3.14 names this kill_workers()
                process.kill()
        say(f"interrupted; {len(kept) + len(fitted)} of {len(models)} held-out tables are in "
            f"{out.held_out}: the same command fits only the other {len(models) - len(kept) - len(fitted)}")
        return 130
    finally:
        if executor is not None:
            executor.shutdown(cancel_futures=True)
    programs.to_csv(out.validation, index=False)
    summary = validation.summary(programs)
    print(summary.to_string(index=False, float_format=format_number))
    levels = {table.intervals.level for table in tables.values() if table.intervals}
    say(validation.interval_line(validation.strategy_programs(programs), max(levels, default=None)))
    say(f"{len(tables)} held-out tables in {out.held_out} ({len(kept)} kept, {len(fitted)} fitted), "
        f"every program's prediction in {out.validation}")
    return 0
