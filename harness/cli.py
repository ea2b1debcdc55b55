"""The ``layoutbench`` command line: its parser, and the dispatch to :mod:`harness.commands`.

stdout carries only the result (table, JSON or CSV) so it can be piped; progress, logs and
whatever the libraries print go to stderr. ExecuTorch's and torch's warnings are silenced
unless ``--verbose``. Exit codes: 0 done, 1 a measurement failed (its record says why) or
the gate found a regression, 2 the command was wrong (one line says what to change), 141
(as for a command SIGPIPE ends, silently) where stdout's reader went away (``| head``).
"""

import argparse
import gc
import os
import signal
import sys

from costmodel.table import COSTS_ENV
from harness import quiet
from harness.cache import ENTRY_KINDS
from harness.commands import PROGRAM, explore, fitting, inspections, say, sweeps, top_up, upkeep
from harness.commands.option_types import (
    add_costs_argument, add_model_and_strategies, count, device_limits, gibibytes, positive)
from harness.errors import LayoutbenchError, MeasurementError
from harness.results.schema import default_thresholds
from layoutkit.files import CacheSettings, install


def _add_sweep_arguments(command, required: bool) -> None:
    chosen = command.add_mutually_exclusive_group(required=required)
    chosen.add_argument("--models", help="comma-separated models: zoo names, timm:<name>, <name>.unfused, <name>.int8, "
                        "package.module:factory, file.py:factory, or a .pt2 saved with torch.export.save")
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
    workers.add_argument("--workers", type=count, default=None,
                         help="models measured at once on this machine (default: its cores; 0: in this process); "
                         "one more worker reads its model's cached lowering meanwhile, unless programs are run")
    workers.add_argument("--ray", nargs="?", const="local", metavar="ADDRESS",
                         help="run on a Ray cluster: its address (ray://host:10001, or auto), or none for Ray's "
                         "default ($RAY_ADDRESS, else a new cluster on this machine)")
    workers.add_argument("--time-limit", type=positive, metavar="SECONDS", help="per model and worker")
    workers.add_argument("--memory-limit", type=gibibytes, metavar="GIB", help="resident memory per worker (its "
                         "children included); on Ray, also what a task reserves (default 4)")
    add_costs_argument(command, "every Vulkan record predicts its GPU time (predicted_gpu_ms), and ilp-time "
                       "minimises it")
    _add_runtime_arguments(command.add_argument_group("vulkan-run", "running the programs (--target vulkan-run)"))


def _add_no_wait_argument(command) -> None:
    command.add_argument("--no-wait", action="store_true",
                         help="stop (exit 2) if another command is writing --out, instead of waiting for it")


def _add_runtime_arguments(group) -> None:
    group.add_argument("--et-runner", help="executor_runner built with Vulkan (and the event tracer, for its latency "
                       "and GPU times); default: $LAYOUTBENCH_ET_RUNNER, executor_runner on PATH, the cache's "
                       "runtime/, else ExecuTorch pybindings if they have VulkanBackend")
    group.add_argument("--warmup", type=positive, default=1, help="untimed inferences first (default 1)")
    group.add_argument("--iterations", type=positive, default=10, help="timed inferences (default 10)")
    group.add_argument("--processes", type=positive, default=3,
                       help="runtime processes per program, where the runtime times itself (ETDump): the record "
                            "is the fastest one's (default 3)")


def _add_gate_arguments(command, required: bool) -> None:
    gate = command.add_argument_group("regression gate", "judging a candidate results directory")
    gate.add_argument("--baseline", required=required, help="results directory of the reference (e.g. main)")
    gate.add_argument("--candidate", required=required, help="results directory of the change under test")
    gate.add_argument("--threshold", default=default_thresholds(),
                      help="allowed growth per metric, absolute or %% of the baseline (default: %(default)s)")
    gate.add_argument("--allow-incomparable", action="store_true", help="compare values measured on different "
                      "devices, in different precisions or by different cost tables (refused otherwise: exit 2)")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROGRAM, description="Compare tensor layout strategies of ExecuTorch backends on a model zoo.")
    parser.add_argument("--verbose", action="store_true", help="show library warnings and logs")
    commands = parser.add_subparsers(dest="command", required=True)

    listing = commands.add_parser("list", help="list models, zoos, strategies or targets")
    listing.add_argument("what", choices=("models", "zoos", "strategies", "targets"))
    listing.add_argument("--zoo", help="only the models of this zoo")

    run = commands.add_parser("run", help="measure models x strategies on targets into a results directory")
    _add_sweep_arguments(run, required=True)
    run.add_argument("--format", choices=("table", "json", "csv"), default="table")
    sweeps.add_device_arguments(run)

    gate = commands.add_parser("gate", help="judge a candidate results directory against a baseline; "
                               "exit 1 when a metric got worse past its threshold")
    _add_gate_arguments(gate, required=True)
    gate.add_argument("--format", choices=("table", "json", "csv"), default="table")

    compare = commands.add_parser(
        "compare", help="run (with --models/--zoo) or gate (with --baseline/--candidate); kept for scripts",
        description="With --models/--zoo: the same as run. With --baseline/--candidate: the same as gate.")
    _add_sweep_arguments(compare, required=False)
    _add_gate_arguments(compare, required=False)
    compare.add_argument("--format", choices=("table", "json", "csv"), default="table")
    compare.set_defaults(device=None, adb=None)  # as for run, which compare runs

    explain = commands.add_parser("explain", help="why each transition of one strategy exists")
    add_model_and_strategies(explain, "a second strategy: where the two disagree")
    explain.add_argument("--format", choices=("table", "json"), default="table")
    add_costs_argument(explain, "each program's predicted time, its interval and the nodes outside the table's support")
    explain.add_argument("--graph", help="also draw the delegated graph to this file (.svg, .png or .pdf)")
    explore.add_parser(commands)

    profile = commands.add_parser("profile", help="where one strategy's program spends GPU time (ET-VK ETDump), per "
                                  "operator and representation; with --vs, what another strategy's choices change")
    add_model_and_strategies(profile, "a second strategy to compare with")
    profile.add_argument("--out", default="results", help="where the runs are kept (reused while nothing changed)")
    profile.add_argument("--fresh", action="store_true", help="run again even if the results directory has the runs")
    profile.add_argument("--recorded", action="store_true", help="profile the runs --out holds (import-remote's); run nothing")
    _add_no_wait_argument(profile)
    profile.add_argument("--chart", help="bar chart file (default: OUT/profile-MODEL-STRATEGY[-vs-OTHER].png)")
    profile.add_argument("--top", type=positive, default=10, help="dispatches in the top list (default 10)")
    profile.add_argument("--format", choices=("table", "json"), default="table")
    _add_runtime_arguments(profile)
    profile.add_argument("--workers", type=count, default=None, help="as for run (0: in this process)")
    profile.set_defaults(ray=None, time_limit=None, memory_limit=None, costs=os.environ.get(COSTS_ENV))  # as for run

    calibrate = commands.add_parser(
        "calibrate", help="measure what each node costs in each representation on this machine's Vulkan device "
        "(a few assignments per model that together cover them) and fit a cost table for --costs and ilp-time")
    _add_sweep_arguments(calibrate, required=False)
    calibrate.add_argument("--rounds", type=positive, default=6,
                           help="calibration assignments per model (default %(default)s, at most 8)")
    calibrate.add_argument("--fit", nargs="+", metavar="RUNS",
                           help="fit from these runs instead (results directories of one device, e.g. "
                           "import-remote's, or measured nodes kept by --nodes); no program is run")
    calibrate.add_argument("--table", help="the cost table to write (default: OUT/costs.json)")
    calibrate.add_argument("--limits", type=device_limits, help="the device's limits the table carries, in place of "
                           "those its runs read: maxImageDimension3D=N,maxImageDimension2D=N,maxStorageBufferRange=N")
    calibrate.add_argument("--as-device", metavar="NAME", help="with --fit: runs of several devices that run ET-VK "
                           "alike (an H100 and an H200) as NAME's; the table's corpus names each (measured_on)")
    calibrate.add_argument("--nodes", help="also keep the measured nodes in this file (.jsonl.gz): the runs, "
                           "small enough to keep, from which --fit and --validate work again")
    calibrate.add_argument("--validate", action="store_true", help="leave one model out: per model, a table fitted "
                           "without it (OUT/held-out/MODEL.json; a re-run fits only those missing) predicts its "
                           "programs; OUT/validation.csv. --workers fits at once (default: cores; 0: in this process)")
    fitting.add_few_shot_arguments(calibrate)
    top_up.add_top_up_arguments(calibrate)
    calibrate.set_defaults(strategies="", target="vulkan-run")

    inspections.add_cost_parsers(commands)

    preferences = commands.add_parser("preferences", help="what a device's cost table rewards: per operator, the "
                                      "representations its fit prefers and when; several tables side by side")
    preferences.add_argument("tables", nargs="+", metavar="TABLE", help="cost tables written by calibrate")
    preferences.add_argument("--format", choices=("table", "json"), default="table")

    upkeep.add_remote_parsers(commands)

    report = commands.add_parser("report", help="an HTML and Markdown report of a results directory")
    report.add_argument("results", help="results directory written by run")
    report.add_argument("--out", help="HTML file to write (default: RESULTS/report.html; Markdown beside it)")
    report.add_argument("--v3", metavar="FILE.json", help="instead: the records in PyTorch's benchmark v3 shape")

    cache = commands.add_parser("cache", help="where the caches are, their entries, size, limit; --clear empties them")
    cache.add_argument("--clear", nargs="*", metavar="KIND", help="empty these kinds of cache (all when none is named)")
    cache.add_argument("--unused-for", type=count, metavar="DAYS",
                       help="with --clear: remove only the entries no run has used for DAYS days "
                            f"(of {', '.join(ENTRY_KINDS)})")
    cache.add_argument("--format", choices=("table", "json"), default="table")

    runtime = commands.add_parser(
        "runtime", help="which ExecuTorch runtime vulkan-run would use, and why; runtime build: build an "
        "executor_runner with Vulkan into the cache, where vulkan-run, profile and asv find it with no flag")
    runtime.add_argument("action", nargs="?", choices=("build",), help="build (or reuse) the runner")
    runtime.add_argument("--source", help="build: an ExecuTorch source tree with its submodules (default: a "
                         "shallow clone of the tag of the installed executorch; needs internet)")
    runtime.add_argument("--toolchain", metavar="FILE", help="build: for another device, with this CMake toolchain "
                         "file (docs/new-device.md); cached apart, never picked by runs on this host")
    runtime.add_argument("--cmake-arg", action="append", default=[], metavar="-DNAME=VALUE",
                         help="build: a CMake flag added to the runner's, written --cmake-arg=-DNAME=VALUE "
                         "(repeatable; part of the cache key)")
    runtime.add_argument("--rebuild", action="store_true", help="build: compile again (incremental) if cached")
    runtime.add_argument("--jobs", type=positive, help="build: compile jobs (default: the machine's cores)")
    runtime.add_argument("--et-runner", help="report: as for run, to see what a flag would pick")

    serve = commands.add_parser("serve", help="start a warm server that imports torch and ExecuTorch once: later "
                                "commands run forked from it and start in milliseconds (see --status, --stop)")
    serve.add_argument("--idle-minutes", type=float, default=30.0,
                       help="end after this long without a command (default: %(default)g)")
    what = serve.add_mutually_exclusive_group()
    what.add_argument("--status", action="store_true", help="say whether one runs, and what it holds")
    what.add_argument("--stop", action="store_true", help="end it once its running commands have")

    dashboard = commands.add_parser("dashboard", help="make asv publish's pages work offline (scripts from npm, not CDNs)")
    dashboard.add_argument("html", nargs="?", default=".asv/html", help="asv's html_dir (default: %(default)s)")
    return parser


COMMANDS = {"list": upkeep.list_names, "run": sweeps.run, "gate": sweeps.gate, "compare": sweeps.compare,
            "explain": inspections.explain, "profile": inspections.profile, "costs": inspections.costs,
            "coverage": inspections.coverage,
            "calibrate": fitting.calibrate, "pack": upkeep.pack, "import-remote": upkeep.import_remote,
            "report": upkeep.report, "cache": upkeep.cache, "runtime": upkeep.runtime, "serve": upkeep.serve,
            "dashboard": upkeep.dashboard, "preferences": inspections.preferences, "explore": explore.explore}
NO_SERVER_ENV = "LAYOUTBENCH_NO_SERVER"


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    args.environment = dict(os.environ)  # as the user set it: the one a warm server serves (see serve)
    # A kill raises KeyboardInterrupt, as Ctrl-C does: it ends the workers and keeps finished records.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    quiet.apply(args.verbose, os.environ)
    try:
        install(CacheSettings.from_environment(args.environment))  # a bad setting stops any command before it starts
        code = COMMANDS[args.command](args)
        sys.stdout.flush()  # here, where a reader that went away is caught, not at the interpreter's exit
        return code
    except BrokenPipeError:  # stdout's reader went away (| head): end quietly, as a command SIGPIPE ends
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    except MeasurementError as error:
        say(f"failed: {error}")
        return 1
    except LayoutbenchError as error:  # one line per problem it names
        print("\n".join(f"{PROGRAM}: error: {line}" for line in str(error).splitlines()), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        say("interrupted; finished records are kept, re-run to resume")
        return 130


def warm_main(argv: list[str]) -> int:
    """:func:`main` in a process forked from a warm server (:mod:`harness.warm`), which has
    imported what workers need: they fork from this process."""
    from harness.sweep import fork_server

    fork_server.fork_from_here()
    return main(argv)


def _through_warm_server(argv: list[str]) -> int | None:
    """The exit code of the command where a warm server ran it, else None (none serves, it
    declined, or the command is one to run here: serve itself, and --verbose)."""
    command = next((i for i, a in enumerate(argv) if not a.startswith("-")), None)
    verbose = command is not None and any(len(a) > 2 and "--verbose".startswith(a) for a in argv[:command])
    if command is None or argv[command] == "serve" or verbose or os.environ.get(NO_SERVER_ENV) == "1":
        return None
    from harness.warm import client
    from layoutkit.errors import UsageError  # a cache setting that is wrong: main says so in one line

    try:
        return client.forward("harness.cli:warm_main", argv)  # by name: under python -m this is __main__
    except UsageError:
        return None
    except client.Declined as declined:
        say(f"running without the warm server: {declined}")
        return None
    except client.ServerGone as gone:
        say(f"failed: {gone}")
        return 1


def console() -> None:
    """The ``layoutbench`` executable: the command in a warm server where one serves (see
    :mod:`harness.warm`), else :func:`main` here, then an exit without the interpreter's
    last garbage collection, which walks every object of torch and ExecuTorch (about a
    second) only to free memory the ending process gives back anyway. Objects are still
    released as their modules are torn down; only cyclic garbage is left to the exit."""
    code = _through_warm_server(sys.argv[1:])
    if code is None:
        code = main()
    gc.freeze()
    sys.exit(code)


if __name__ == "__main__":
    console()
