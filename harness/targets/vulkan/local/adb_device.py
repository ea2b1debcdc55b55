"""Programs made here run on a device reached by ``adb`` (``run --device adb[:SERIAL]``), as
ExecuTorch's ``devtools/scripts/benchmark_android.sh`` runs them on a phone.

The programs with their weights (the outputs computed there come back and are held to eager
PyTorch's: a wrong shader fails its record) and the device's runner go into a bundle for
``run.sh`` (:func:`harness.targets.vulkan.remote.packing.pack_bundle`), kept in the device's
results directory so that ``adb push --sync`` sends only what changed (adb skips a file of the
same size and time). Each program then runs alone, ``sh run.sh --only PROGRAM`` through ``adb
shell`` (its runner processes, their event tracer, and the Vulkan device and its limits read by
the device's vulkaninfo, on its PATH or pushed to /data/local/tmp), and its ETDumps and outputs
are pulled and imported (:mod:`.remote_import`) before the next starts: a dropped connection
loses at most the program in flight, and the same command resumes with the programs not imported
yet. Once every program is, the device's scratch directory is removed.
"""

import shlex
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from harness.errors import MeasurementError, UsageError
from harness.results.provenance import file_digest
from harness.results.results_dir import ResultsDir
from harness.results.store import RecordStore
from harness.targets.base import RunSettings
from harness.targets.vulkan.local.remote_import import import_remote, program_name
from harness.targets.vulkan.local.runners import built_runners
from harness.targets.vulkan.remote import packing
from layoutkit.errors import last_line

DEVICE_DIR = "/data/local/tmp/layoutbench"  # the scratch directory: adb shell may write /data/local/tmp
# A phone's shell has no vulkaninfo, and adb shell cannot add one to its PATH: one pushed to /data/local/tmp
WITH_PUSHED_TOOLS = 'export PATH="$PATH:/data/local/tmp"; '
STATE_ADVICE = {"unauthorized": "accept the USB debugging prompt on its screen",
                "offline": "reconnect it (unplug it, or `adb reconnect`)"}


@dataclass(frozen=True)
class Adb:
    """``adb`` talking to one device."""

    executable: str
    serial: str

    def __call__(self, *arguments: str, doing: str) -> str:
        """adb's output; a one-line error saying what was ``doing`` where it fails (the device gone)."""
        done = subprocess.run([self.executable, "-s", self.serial, *arguments], capture_output=True, text=True)
        if done.returncode:
            said = [line.strip() for line in (done.stderr + done.stdout).splitlines() if line.strip()]
            raise MeasurementError(f"adb failed {doing} on {self.serial} ({said[-1] if said else 'no message'}); "
                                   "re-run the same command to resume where it stopped")
        return done.stdout


def connect(device: str, executable: str | None) -> Adb:
    """The device ``--device`` names (``adb`` alone: the only one attached, ``adb:SERIAL``),
    through ``executable`` (default: adb on PATH); a one-line error where it cannot be used."""
    if device != "adb" and not device.startswith("adb:"):
        raise UsageError(f"--device {device}: name adb (the only device adb lists) or adb:SERIAL")
    found = shutil.which(executable or "adb")
    if found is None:
        raise UsageError(f"no adb {'at ' + executable if executable else 'on PATH'}: install Android's platform "
                         "tools (Debian: apt-get install adb) or name it with --adb PATH")
    listed = subprocess.run([found, "devices"], capture_output=True, text=True)
    if listed.returncode:
        raise UsageError(f"{found} devices failed: {last_line(listed.stderr, 'no message')}")
    states = dict(line.split("\t")[:2] for line in listed.stdout.splitlines() if "\t" in line)  # SERIAL<tab>STATE
    serial = device.removeprefix("adb").removeprefix(":") or None
    if serial is None and len(states) != 1:
        raise UsageError("adb lists no device: attach one with USB debugging on (adb devices)" if not states else
                         f"adb lists {len(states)} devices ({', '.join(states)}): name one, --device adb:SERIAL")
    serial = serial or next(iter(states))
    if serial not in states:
        raise UsageError(f"adb lists no device {serial} (it lists {', '.join(states) or 'none'}): check the serial "
                         "and the cable")
    if states[serial] != "device":
        advice = STATE_ADVICE.get(states[serial], "make it ready (adb devices says device)")
        raise UsageError(f"{serial} is {states[serial]}: {advice}, then re-run")
    return Adb(found, serial)


def device_runner(et_runner: str | None) -> Path:
    """The runner the device runs: ``--et-runner``, else the one runtime built for another
    device in the cache (``runtime build --toolchain``)."""
    if et_runner:
        return Path(et_runner)
    built = [path for path, record in built_runners() if record.get("toolchain")]
    if len(built) != 1:
        raise UsageError(f"{'no' if not built else len(built)} runtimes built for another device in the cache: "
                         "name the device's executor_runner with --et-runner PATH (runtime build --toolchain "
                         "FILE builds one)")
    return built[0]


def _program_key(record: dict) -> tuple:
    """What makes a program another one: its model, strategy and the code that made them."""
    return tuple(record[k] for k in ("model", "strategy", "model_digest", "strategy_digest", "harness_digest"))


def _done(out: Path, runner_digest: str, settings: RunSettings) -> set[tuple]:
    """The programs (:func:`_program_key`) ``out`` holds an ok record of, run by this runner so."""
    ran = {"warmup": settings.warmup, "iterations": settings.iterations, "processes": settings.processes}
    return {_program_key(r) for r in RecordStore(out).latest(status="ok")
            if r["environment"]["runtime"] == f"executor_runner:{runner_digest}"
            and {k: r["environment"]["run_settings"][k] for k in ran} == ran}


def _synced_bundle(results: Path, runner: Path, kept: Path) -> None:
    """``kept`` made the bundle of ``results``' programs and ``runner``, its unchanged files left
    as they were (their times too: adb push --sync skips them)."""
    fresh = Path(tempfile.mkdtemp(prefix=".bundle-", dir=kept.parent))
    try:
        shutil.rmtree(fresh)
        packing.pack_bundle(results, fresh, runner, weights=True)
        new = {path.relative_to(fresh) for path in fresh.rglob("*") if path.is_file()}
        for old in [path for path in kept.rglob("*") if path.is_file() and path.relative_to(kept) not in new]:
            old.unlink()
        for name in new:
            if not (kept / name).is_file() or (kept / name).read_bytes() != (fresh / name).read_bytes():
                (kept / name).parent.mkdir(parents=True, exist_ok=True)
                (fresh / name).replace(kept / name)
    finally:
        shutil.rmtree(fresh, ignore_errors=True)


def run_on_device(adb: Adb, results: Path, records: list[dict], runner: Path, settings: RunSettings,
                  out: Path, say, fresh: bool = False, wait: bool = True) -> list[dict]:
    """The ok vulkan-run ``records`` of ``results`` run on the device by ``runner`` and imported
    into ``out``, those it holds an ok record of already left as they are (unless ``fresh``); their
    records there, and progress per program said by ``say``. ``out`` is held meanwhile (``wait``:
    for another command writing it, as a sweep waits)."""
    if not (runner.is_file() and runner.stat().st_mode & 0o111):
        raise UsageError(f"--et-runner {runner} is not an executable file")
    with RecordStore(out).writing(wait):
        _run_and_import(adb, results, records, runner, settings, out, say, fresh)
    wanted = {(r["model"], r["strategy"]) for r in records}
    return [r for r in RecordStore(out).latest() if (r["model"], r["strategy"]) in wanted]


def _run_and_import(adb: Adb, results: Path, records: list[dict], runner: Path, settings: RunSettings,
                    out: Path, say, fresh: bool) -> None:
    done = set() if fresh else _done(out, file_digest(runner), settings)  # the digest as run.sh names it
    todo = [r for r in records if r["target"] == "vulkan-run" and r["status"] == "ok"
            and _program_key(r) not in done]
    if todo:
        found = adb("shell", f"{WITH_PUSHED_TOOLS}mkdir -p {DEVICE_DIR} && (command -v vulkaninfo || echo none)",
                    doing="making its scratch directory")
        if not found.strip().endswith("vulkaninfo"):
            raise UsageError(f"{adb.serial} has no vulkaninfo, which names its Vulkan device and reads its limits "
                             "there: adb push one for its ABI (the Vulkan SDK's) to /data/local/tmp, then re-run")
        bundle = ResultsDir(out).adb_bundle
        bundle.mkdir(parents=True, exist_ok=True)
        _synced_bundle(results, runner, bundle)
        started = time.monotonic()
        pushed = adb("push", "--sync", *map(str, sorted(bundle.iterdir())), DEVICE_DIR, doing="pushing the bundle")
        say(f"bundle pushed to {adb.serial}:{DEVICE_DIR} in {time.monotonic() - started:.1f} s "
            f"({last_line(pushed, '')})")
    for index, record in enumerate(todo, 1):
        name = program_name(record)
        device_out = f"{DEVICE_DIR}/results/{index}"
        options = (f"--only {shlex.quote(name)} --out {device_out} --warmup {settings.warmup} "
                   f"--iterations {settings.iterations} --processes {settings.processes}")
        started = time.monotonic()
        adb("shell", f"{WITH_PUSHED_TOOLS}cd {DEVICE_DIR} && chmod +x {packing.BUNDLE_RUNNER} && sh run.sh {options}",
            doing=f"running {name}")
        ran = time.monotonic()
        with tempfile.TemporaryDirectory(dir=out.parent) as pulled:
            adb("pull", device_out, pulled, doing=f"pulling {name}'s ETDumps and outputs")
            pull_seconds = time.monotonic() - ran
            [imported] = import_remote(results, Path(pulled) / str(index), out)
        adb("shell", f"rm -rf {device_out}", doing=f"removing {name}'s ETDumps and outputs there")
        outcome = imported["reason"] if imported["status"] != "ok" else f"{imported['latency_ms_median']:.3f} ms"
        say(f"[{index}/{len(todo)}] {name} on {adb.serial}: run {ran - started:.1f} s, pull {pull_seconds:.1f} s: "
            f"{outcome}")
    adb("shell", f"rm -rf {DEVICE_DIR}", doing="cleaning its scratch directory")
