"""The upkeep commands: list, report, cache, runtime, serve, dashboard, pack and import-remote; and the
packing of a calibration's programs for a device elsewhere."""

import functools
import time
from pathlib import Path

import pandas as pd

from harness.cache import ENTRY_KINDS, KINDS, clear, prune, usage
from harness.commands import PROGRAM, say
from harness.commands.option_types import device_limits
from harness.commands.output import render_records
from harness.errors import UsageError
from harness.results.table import format_value
from layoutkit import strict_json
from layoutkit.files import MAX_SIZE_ENV, cache_folder, cache_root, cache_settings


def add_remote_parsers(commands) -> None:
    """The ``pack`` and ``import-remote`` commands' options: programs for a machine elsewhere, and its runs back."""
    pack = commands.add_parser("pack", help="programs (weightless unless --weights) for remote_runner.py or (--bundle) "
                               "a device's sh")
    pack.add_argument("results", help="a results directory written by run --target vulkan-run")
    pack.add_argument("out", help="the .tar, .tar.gz or .tar.xz to write; with --bundle, or a new directory")
    pack.add_argument("--bundle", action="store_true", help="with run.sh, which runs them as remote_runner.py does")
    pack.add_argument("--runner", help="--bundle: an executor_runner for that device, the one run.sh runs by default")
    pack.add_argument("--weights", action="store_true", help="keep their weights: import-remote then holds the "
                      "outputs there to eager PyTorch's (weightless, they compute on random weights)")

    remote = commands.add_parser("import-remote", help="records of programs run elsewhere by remote_runner.py or run.sh")
    remote.add_argument("results", help="the results directory (vulkan-run) whose programs were run there")
    remote.add_argument("archive", help="the tar remote_runner.py wrote, or the directory run.sh filled")
    remote.add_argument("--out", required=True, help="results directory for that machine's records")
    remote.add_argument("--device", help="the Vulkan device that ran them, where ARCHIVE does not say")
    remote.add_argument("--limits", type=device_limits, help="its limits, where ARCHIVE states none: as calibrate's")
    remote.add_argument("--copy-programs", action="store_true", help="copy the programs, node maps and eager's outputs "
                        "into --out (default: links to them in RESULTS, which must then stay)")
    remote.add_argument("--format", choices=("table", "json", "csv"), default="table")
    remote.add_argument("--columns", help="table columns, as for run")


def pack(args) -> int:
    from harness.targets.vulkan.remote import packing

    if args.runner and not args.bundle:
        raise UsageError("--runner goes into a bundle: add --bundle")
    count = (packing.pack_bundle(args.results, args.out, args.runner, args.weights) if args.bundle
             else packing.pack(args.results, args.out, args.weights))
    what = "a bundle for run.sh" if args.bundle else "a tar for remote_runner.py"
    say(f"{count} programs, {'with' if args.weights else 'without'} their weights, packed into {args.out}, {what}")
    print(args.out)
    return 0


def pack_programs(args, records: list[dict], fit_command: str) -> int:
    """``--pack``: the programs swept, checked here, packed for the device, and what to do next
    (``fit_command``: the calibrate command that then fits DEVICE_RUNS)."""
    from harness.targets.vulkan.remote import packing

    if any(r["status"] != "ok" for r in records):
        raise UsageError(f"not packed: {sum(r['status'] != 'ok' for r in records)} of the {len(records)} programs "
                         "did not lower or run here (reasons above)")
    bundle = Path(args.pack).suffix not in packing.TAR_MODES
    count = packing.pack_bundle(args.out, args.pack) if bundle else packing.pack(args.out, args.pack)
    runs = ("its run.sh" if bundle else
            "remote_runner.py PROGRAMS executor_runner device.tar --warmup 2 --iterations 20 --processes 3")
    say(f"{count} programs packed into {args.pack}; run them there ({runs}), then: layoutbench "
        f"import-remote {args.out} ARCHIVE --out DEVICE_RUNS; layoutbench {fit_command}")
    print(args.pack)
    return 0


def import_remote(args) -> int:
    from harness.targets.vulkan.local.remote_import import import_remote

    records = import_remote(args.results, args.archive, args.out, args.copy_programs, args.device, args.limits)
    print(render_records(records, args.format, args.columns))
    failed = [r for r in records if r["status"] == "failed"]
    for record in failed:
        say(f"{record['model']} / {record['strategy']}: {record['reason']}")
    say(f"{len(records)} records of {records[0]['environment']['vulkan_device']} in {args.out}")
    return 1 if failed else 0


def report(args) -> int:
    from harness.results.report import write_report

    if args.v3:
        return _report_v3(args)
    html = write_report(args.results, args.out)
    say(f"report written to {html} (Markdown: {html.with_suffix('.md')})")
    print(html)
    return 0


def _report_v3(args) -> int:
    from harness.results.pytorch_v3 import write_v3

    if args.out:
        raise UsageError("--out names the HTML report, --v3 the v3 records written in its place: drop one")
    count = write_v3(args.results, args.v3)
    say(f"{count} records in the PyTorch OSS benchmark v3 shape written to {args.v3}: test-infra's "
        "upload-benchmark-results action uploads its directory")
    print(args.v3)
    return 0


def dashboard(args) -> int:
    from harness.results.dashboard import vendor

    count = vendor(args.html)
    say(f"{count} CDN references in {args.html} now point at local copies")
    return 0


def cache(args) -> int:
    limit, size = cache_settings().max_size, functools.partial(format_value, "pte_bytes")
    if args.unused_for is not None and args.clear is None:
        raise UsageError("--unused-for says which entries --clear removes: add --clear [KIND ...]")
    if args.clear is not None:
        unknown = sorted(set(args.clear) - set(KINDS))
        if unknown:
            raise UsageError(f"unknown cache kind {', '.join(unknown)}; known: {', '.join(KINDS)}")
        if args.unused_for is None:
            clear(args.clear or list(KINDS))
            say(f"cleared {', '.join(args.clear or KINDS)} in {cache_root()}")
        else:
            tools = sorted(set(args.clear) - set(ENTRY_KINDS))
            if tools:
                raise UsageError(f"{', '.join(tools)}: tools, not entries; clear them whole, without --unused-for")
            kinds = args.clear or list(ENTRY_KINDS)
            removed, removed_bytes = prune(kinds, args.unused_for)
            say(f"removed {removed} entries ({size(removed_bytes)}) unused for {args.unused_for} days from "
                f"{', '.join(kinds)} in {cache_root()}")
    rows = usage()
    if args.format == "json":
        print(strict_json.dumps({"root": str(cache_root()), "max_size": limit, "kinds": rows}, indent=1))
        return 0
    entries = sum(r["bytes"] for r in rows if r["kind"] in ENTRY_KINDS)
    if limit is not None and entries > limit:  # the limit was lowered since the last entry was added
        held = (f"entries {size(entries)}, over their limit of {size(limit)} ({MAX_SIZE_ENV}): the least recently "
                "used that no running command uses go as soon as a command adds an entry")
    else:
        held = f"entries {size(entries)} of at most {size(limit) if limit else 'any size'}, {MAX_SIZE_ENV}"
    print(f"{cache_root()} ({size(sum(r['bytes'] for r in rows))}; {held})")
    table = pd.DataFrame(rows).set_index("kind")
    table["bytes"] = table["bytes"].map(size)
    print(table[["entries", "bytes", "holds"]].to_string())
    return 0


def runtime(args) -> int:
    from harness.targets import HostSettings
    from harness.targets.vulkan.local import runtime_build

    host = HostSettings.from_environment(args.environment)
    if args.action == "build":
        if args.et_runner:
            raise UsageError("--et-runner names a runtime to report on; runtime build builds one: drop it")
        print(runtime_build.build(args.source, args.cmake_arg, args.rebuild, args.jobs, host, args.toolchain))
        return 0
    if args.source or args.cmake_arg or args.rebuild or args.jobs or args.toolchain:
        raise UsageError("--source, --toolchain, --cmake-arg, --rebuild and --jobs go with runtime build")
    text, found = runtime_build.report(args.et_runner, host)
    print(text)
    return 0 if found else 1


def _describe_server(answer: dict) -> str:
    up = time.time() - answer["started"]
    return (f"warm server {answer['pid']}: up {up / 60:.0f} min, {answer['served']} commands served "
            f"({answer['running']} running), {answer['modules']} module files imported, "
            f"{answer['resident_bytes'] / (1 << 20):.0f} MiB resident; it ends after "
            f"{answer['idle_seconds'] / 60:g} min without a command")


def serve(args) -> int:
    from harness.warm import client

    cache_folder()  # a cache others could write is refused before a server is started on it
    socket_path, log = client.server_files()
    try:
        if args.stop or args.status:
            answer = client.stop() if args.stop else client.status()
            if answer is None:
                say(f"no warm server for this code and cache ({socket_path})")
                return 1
            say(f"warm server stops once its {answer['stopping']} running commands end" if args.stop
                else _describe_server(answer))
            return 0
        answer = client.status()
        if answer is None:
            say(f"starting a warm server: it imports torch, ExecuTorch and the other libraries once (log: {log})")
            answer = client.start(args.environment, args.idle_minutes)
    except (client.Declined, RuntimeError) as problem:  # a socket not the user's, a server that did not start
        raise UsageError(str(problem)) from None
    say(f"{_describe_server(answer)}; commands run through it (LAYOUTBENCH_NO_SERVER=1 or "
        f"--verbose: without it; `{PROGRAM} serve --stop` ends it)")
    return 0


def list_names(args) -> int:
    if args.what in ("models", "zoos"):
        import models

        names = models.list_zoos() if args.what == "zoos" else models.list_models(zoo=args.zoo or None)
    elif args.what == "strategies":
        import strategies

        names = strategies.list_strategies()
    else:
        from harness.targets import list_targets

        names = list_targets()
    print("\n".join(names))
    return 0
