"""``run --device adb``: programs made here, run on a device through ``adb`` as run.sh runs them, their
ETDumps pulled and imported; against the stand-in adb (tests/helpers/standin_adb.py) whose device is a
directory here and whose shell is mksh, Android's. A stand-in runner hands back the real ETDumps of
``tests/data/etvk`` (an ET-VK runner's on lavapipe); the host's real runner, where it is built, runs
the whole command and is held to remote_runner.py's records."""

import itertools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness import cli
from harness.errors import MeasurementError, UsageError
from harness.results.results_dir import ResultsDir
from harness.results.store import RecordStore, ResultsBusyError, make_record
from harness.targets import RunSettings
from harness.targets.vulkan.local import adb_device
from harness.targets.vulkan.local.remote_import import RUN_FIELDS, import_remote

from .test_bundle import VULKANINFO, _executable
from .test_dispatches import DATA, RECORDED
from .test_remote_runs import _program
from .test_vulkan_run import real_runner  # noqa: F401  (a fixture)

STANDIN_ADB = Path(__file__).parent / "helpers" / "standin_adb.py"
SETTINGS = RunSettings(warmup=1, iterations=2, processes=2)  # the recorded ETDumps hold 3 inferences
# A runner with the event tracer: the recorded ETDump of its program's strategy, as its own
RUNNER = """#!/bin/sh
model=${1#--model_path=}
name=$(basename "$model")  # the program, or its cut where it was pushed with its weights
cp "$FAKE_ETDUMPS/${name%.*}.etdump" model.etdump
"""


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    """synthetic_small's programs of the recorded strategies where vulkan-run leaves them, each with
    the node map of its recorded ETDump, and their ok records."""
    root = tmp_path_factory.mktemp("adb")
    store = RecordStore(root / "results")
    for strategy in RECORDED:
        program = _program(root, "synthetic_small", strategy)
        shutil.copyfile(DATA / f"{strategy}.nodes.json", ResultsDir.beside(program, "node_map"))
        store.append(make_record("synthetic_small", strategy, "vulkan-run", "ok", model_digest="m",
                                 strategy_digest=strategy, harness_digest="h", environment={}, transitions=1))
    return root / "results"


@pytest.fixture
def device(tmp_path, monkeypatch) -> Path:
    """The stand-in's device: its filesystem, with a vulkaninfo pushed to /data/local/tmp, as onto a
    phone that has none; every call logged."""
    root = tmp_path / "device"
    (root / "data" / "local" / "tmp").mkdir(parents=True)
    _executable(root / "data" / "local" / "tmp" / "vulkaninfo", VULKANINFO)
    monkeypatch.setenv("STANDIN_ADB_ROOT", str(root))
    monkeypatch.setenv("STANDIN_ADB_LOG", str(tmp_path / "adb.log"))
    monkeypatch.setenv("FAKE_ETDUMPS", str(DATA))
    if not shutil.which("mksh"):
        pytest.skip("no mksh here (apt-get install mksh), the shell of Android the stand-in device runs")
    return root


def _calls(tmp_path: Path) -> list[list[str]]:
    log = tmp_path / "adb.log"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def _runs(calls: list[list[str]]) -> list[str]:
    """The shell commands among adb's calls that ran run.sh."""
    return [call[3] for call in calls if call[2:3] == ["shell"] and "run.sh" in call[3]]


def _run(results: Path, tmp_path: Path, said: list, fresh: bool = False) -> list[dict]:
    adb = adb_device.connect("adb", str(STANDIN_ADB))
    runner = _executable(tmp_path / "executor_runner", RUNNER)
    records = list(RecordStore(results).read())
    return adb_device.run_on_device(adb, results, records, runner, SETTINGS, tmp_path / "device-runs", said.append,
                                    fresh)


def test_programs_run_on_the_device_come_back_as_records_with_latency_and_gpu_time(results, tmp_path, device):
    """Each program run alone by run.sh under mksh with the runs settings, its ETDumps pulled and
    imported: latency and GPU time from them, the device's Vulkan GPU as its vulkaninfo names it,
    progress per program; the scratch directory gone after; a second run runs nothing and pushes
    nothing, its records the same ones; --fresh runs them again."""
    said = []
    records = _run(results, tmp_path, said)
    assert [r["strategy"] for r in records] == list(RECORDED)
    for record in records:
        assert record["status"] == "ok", record["reason"]
        assert record["latency_ms_median"] > 0 and 0 < record["transition_gpu_ms"] < record["gpu_dispatch_ms"]
        assert record["environment"]["vulkan_device"] == 'Mali-G715 "Immortalis"'
        assert record["environment"]["run_settings"]["processes"] == 2
    runs = _runs(_calls(tmp_path))
    assert [run.split("--only ")[1].split()[0] for run in runs] == [
        f"programs/synthetic_small/{strategy}.pte" for strategy in RECORDED]
    assert "--warmup 1 --iterations 2 --processes 2" in runs[0]
    assert said[0].startswith("bundle pushed to emulator-5554:/data/local/tmp/layoutbench in ")
    assert said[1].startswith(f"[1/2] programs/synthetic_small/{RECORDED[0]}.pte on emulator-5554: run ")
    assert not (device / "data/local/tmp/layoutbench").exists()
    calls = len(_calls(tmp_path))
    assert _run(results, tmp_path, said) == records
    assert [call[2:] for call in _calls(tmp_path)[calls:] if call[0] == "-s"] == [
        ["shell", "rm -rf /data/local/tmp/layoutbench"]]
    assert len(RecordStore(tmp_path / "device-runs").read()) == 2
    calls = len(_calls(tmp_path))
    assert [r["strategy"] for r in _run(results, tmp_path, said, fresh=True)] == list(RECORDED)
    assert len(_runs(_calls(tmp_path)[calls:])) == 2
    assert len(RecordStore(tmp_path / "device-runs").read()) == 4


def test_a_dropped_connection_resumes_with_no_record_lost_or_doubled(results, tmp_path, device, monkeypatch):
    """The connection drops while the second program's ETDumps are half pulled: the first program's
    record is kept, the command fails in one line; run again, only the second program runs, and
    push --sync sends nothing new."""
    # calls: devices, vulkaninfo's, push, run, pull, remove, run, then the pull that fails
    monkeypatch.setenv("STANDIN_ADB_FAIL_AFTER", "7")
    with pytest.raises(MeasurementError) as dropped:
        _run(results, tmp_path, [])
    assert str(dropped.value) == (f"adb failed pulling programs/synthetic_small/{RECORDED[1]}.pte's ETDumps and outputs on "
                                  "emulator-5554 (adb: error: device 'emulator-5554' not found); re-run the same "
                                  "command to resume where it stopped")
    assert [r["strategy"] for r in RecordStore(tmp_path / "device-runs").read()] == [RECORDED[0]]
    assert (device / "data/local/tmp/layoutbench").is_dir()  # left for the resumed run
    monkeypatch.delenv("STANDIN_ADB_FAIL_AFTER")
    calls, said = len(_calls(tmp_path)), []
    records = _run(results, tmp_path, said)
    runs = _runs(_calls(tmp_path)[calls:])
    assert len(runs) == 1 and f"{RECORDED[1]}.pte" in runs[0]
    assert "0 files pushed" in said[0], said[0]
    assert [r["strategy"] for r in RecordStore(tmp_path / "device-runs").read()] == list(RECORDED)
    assert all(r["status"] == "ok" for r in records) and len(records) == 2
    assert not (device / "data/local/tmp/layoutbench").exists()


def test_a_device_whose_records_another_command_writes_is_refused_without_waiting(results, tmp_path, device):
    """Two commands on one device: the second, with --no-wait, stops in one line before adb is asked
    anything."""
    adb = adb_device.connect("adb", str(STANDIN_ADB))
    runner = _executable(tmp_path / "executor_runner", RUNNER)
    with RecordStore(tmp_path / "device-runs").writing(), pytest.raises(ResultsBusyError) as busy:
        adb_device.run_on_device(adb, results, list(RecordStore(results).read()), runner, SETTINGS,
                                 tmp_path / "device-runs", print, wait=False)
    assert str(busy.value).startswith(f"{tmp_path / 'device-runs'} is being written by ")
    assert [call for call in _calls(tmp_path) if call[0] == "-s"] == []


@pytest.mark.parametrize("devices, option, message", [
    ("", "adb", "adb lists no device: attach one with USB debugging on (adb devices)"),
    ("a=device,b=device", "adb", "adb lists 2 devices (a, b): name one, --device adb:SERIAL"),
    ("a=unauthorized", "adb:a", "a is unauthorized: accept the USB debugging prompt on its screen, then re-run"),
    ("a=offline", "adb", "a is offline: reconnect it (unplug it, or `adb reconnect`), then re-run"),
    ("a=device", "adb:b", "adb lists no device b (it lists a): check the serial and the cable"),
    ("a=device", "usb", "--device usb: name adb (the only device adb lists) or adb:SERIAL"),
])
def test_a_device_adb_cannot_use_is_one_line(tmp_path, monkeypatch, devices, option, message):
    monkeypatch.setenv("STANDIN_ADB_ROOT", str(tmp_path))
    monkeypatch.setenv("STANDIN_ADB_DEVICES", devices)
    with pytest.raises(UsageError) as refused:
        adb_device.connect(option, str(STANDIN_ADB))
    assert str(refused.value) == message


@pytest.mark.parametrize("options, message", [
    (["--target", "vulkan-run,tosa", "--device", "adb"],
     "--device runs Vulkan programs: drop --target vulkan-run,tosa"),
    (["--adb", str(STANDIN_ADB)], "--adb names the adb of --device: add --device adb"),
])
def test_run_options_for_a_device_that_do_not_fit_are_one_line_and_nothing_is_made(tmp_path, capsys, options,
                                                                                    message):
    code = cli.main(["run", "--models", "synthetic_small", "--strategies", "bfs-downstream", *options, "--out",
                     str(tmp_path / "out")])
    assert (code, capsys.readouterr().err.splitlines()) == (2, [f"layoutbench: error: {message}"])
    assert not (tmp_path / "out").exists()


def test_without_a_runtime_here_nothing_is_made_or_pushed_in_one_line(tmp_path, capsys, no_runtime, device):
    """The programs are checked against eager here before they travel: with no runtime here, none
    is, and the device is left alone."""
    runner = _executable(tmp_path / "executor_runner", RUNNER)
    code = cli.main(["run", "--models", "synthetic_small", "--strategies", "bfs-downstream", "--target", "vulkan-run",
                     "--device", "adb", "--adb", str(STANDIN_ADB), "--et-runner", str(runner), "--workers", "0",
                     "--out", str(tmp_path / "out")])
    assert code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "layoutbench: error: no program was made and checked here, so none runs on the device (reasons above)")
    assert [call for call in _calls(tmp_path) if call[0] == "-s"] == []


def test_no_adb_no_runner_no_vulkaninfo_are_one_line(results, tmp_path, monkeypatch, device):
    path = os.environ["PATH"]
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    with pytest.raises(UsageError) as refused:
        adb_device.connect("adb", None)
    assert str(refused.value) == ("no adb on PATH: install Android's platform tools (Debian: apt-get install adb) "
                                  "or name it with --adb PATH")
    monkeypatch.setenv("PATH", path)
    monkeypatch.setenv("LAYOUTBENCH_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(UsageError) as refused:
        adb_device.device_runner(None)
    assert str(refused.value) == ("no runtimes built for another device in the cache: name the device's "
                                  "executor_runner with --et-runner PATH (runtime build --toolchain FILE builds one)")
    cross = tmp_path / "cache" / "runtime" / "files-1-2"
    cross.mkdir(parents=True)
    (cross / "build.json").write_text(json.dumps({"toolchain": "/x/aarch64-linux-gnu.cmake", "built_for": "Linux aarch64"}))
    (cross / "executor_runner").touch(mode=0o755)
    assert adb_device.device_runner(None) == cross / "executor_runner"
    (device / "data/local/tmp/vulkaninfo").unlink()
    with pytest.raises(UsageError) as refused:
        _run(results, tmp_path, [])
    assert str(refused.value) == ("emulator-5554 has no vulkaninfo, which names its Vulkan device and reads its "
                                  "limits there: adb push one for its ABI (the Vulkan SDK's) to /data/local/tmp, "
                                  "then re-run")
    assert subprocess.run([str(STANDIN_ADB), "get-state"], capture_output=True, text=True).stdout == "device\n"
    # the stand-in's shell under a command prefix, as an emulated device's runs under qemu-aarch64
    prefixed = subprocess.run([str(STANDIN_ADB), "shell", "echo $PREFIXED; readlink $(command -v sh)"],
                              capture_output=True, text=True,
                              env={**os.environ, "STANDIN_ADB_EXEC": "env PREFIXED=yes"})
    assert prefixed.stdout.splitlines() == ["yes", shutil.which("mksh")]


def run_on_device_and_with_remote_runner_py(tmp_path, capsys, device_runner: Path, host_runner: Path) -> list[tuple]:
    """synthetic_small x the recorded strategies made here and run by ``device_runner`` through the
    stand-in adb (run --device adb, one command), then by remote_runner.py with ``host_runner`` here:
    each program's (device record, remote_runner.py's record), both with their outputs compared with
    eager's and within tolerance, the device's scratch directory gone."""
    out = tmp_path / "results"
    options = ["--warmup", "1", "--iterations", "3", "--processes", "2"]
    code = cli.main(["run", "--models", "synthetic_small", "--strategies", ",".join(RECORDED), "--target",
                     "vulkan-run", "--workers", "0", "--out", str(out), "--device", "adb", "--adb",
                     str(STANDIN_ADB), "--et-runner", str(device_runner), "--format", "json", *options])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert f"2 records of emulator-5554 in {ResultsDir(out).device('emulator-5554')}" in captured.err
    on_device = {r["strategy"]: r for r in json.loads(captured.out)}
    assert set(on_device) == set(RECORDED)
    done = subprocess.run([sys.executable, str(Path(cli.__file__).parent / "targets/vulkan/remote/remote_runner.py"),
                           str(out), str(host_runner), str(tmp_path / "py.tar"), *options],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    pairs = [(on_device[record["strategy"]], record) for record in import_remote(out, tmp_path / "py.tar",
                                                                                 tmp_path / "py")]
    for device_record, record in pairs:
        assert device_record["status"] == record["status"] == "ok", (device_record["reason"], record["reason"])
        assert device_record["latency_ms_median"] > 0 and device_record["gpu_dispatch_ms"] > 0
        for compared in (device_record, record):  # the outputs each run brought back, against eager's
            assert compared["max_abs_error"] <= compared["error_tolerance"], compared["run_note"]
    assert not list(Path(os.environ["STANDIN_ADB_ROOT"]).glob("data/local/tmp/layoutbench"))
    return pairs


def but_for(record: dict, fields) -> dict:
    return {k: v for k, v in record.items() if k not in fields}


MEASURED = {*RUN_FIELDS, "run_note", "timestamp"}  # what a run measures


def test_one_command_runs_on_the_device_the_records_remote_runner_py_gives(tmp_path, monkeypatch, real_runner,
                                                                           capsys):
    """run --device adb with the host's runner as the device's: the programs made and checked here,
    run by run.sh under mksh through the stand-in adb; their records are remote_runner.py's for the
    same programs on the same runner but for what a run measures, the same dispatches attributed."""
    from harness.targets.vulkan.remote.device import vulkan_device, vulkan_limits

    root = tmp_path / "device"
    (root / "system" / "bin").mkdir(parents=True)
    limits = vulkan_limits()
    _executable(root / "system" / "bin" / "vulkaninfo", "#!/bin/sh\n" + "".join(
        f"printf '%s\\n' {line!r}\n" for line in [f"\tdeviceName        = {vulkan_device()}", *(
            f"\t\t{name} = {value}" for name, value in limits.items())]))
    monkeypatch.setenv("STANDIN_ADB_ROOT", str(root))
    if not shutil.which("mksh"):
        pytest.skip("no mksh here (apt-get install mksh)")
    for device_record, record in run_on_device_and_with_remote_runner_py(tmp_path, capsys, real_runner.path,
                                                                               real_runner.path):
        assert but_for(device_record, MEASURED) == but_for(record, MEASURED)


def _copy_node_map(source: Path, target: Path, model: str) -> None:
    """``source``'s node map as ``model``'s: its graphs named apart from another model's."""
    target.write_text(source.read_text().replace('"graph": "', f'"graph": "{model}-'))


def test_calibrate_prior_runs_the_chosen_fp16_programs_on_the_device_and_ends_with_its_table(
        results, tmp_path, device, monkeypatch, capsys):
    """calibrate --prior --fp16 --device: the .fp16 variants of the programs the prior chooses made and
    checked here once (untimed), run on the device as run --device runs them, and fitted from the
    device's records into the device's table (its limits the device's), saying whether the prior
    holds there."""
    from harness.commands import fitting

    models = ("synthetic_small", "synthetic_copy")  # the recorded programs, as two models'
    runs = tmp_path / "prior-runs"
    for model, strategy in itertools.product(models, RECORDED):
        program = ResultsDir(runs).program(model, strategy)
        program.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(DATA / f"{strategy}.etdump", program.with_suffix(".etdump"))
        _copy_node_map(DATA / f"{strategy}.nodes.json", program.with_suffix(".nodes.json"), model)
        RecordStore(runs).append(make_record(model, strategy, "vulkan-run", "ok",
                                             environment={"vulkan_device": "old GPU"}))
    prior = tmp_path / "old.json"
    assert cli.main(["calibrate", "--fit", str(runs), "--table", str(prior), "--nodes",
                     str(tmp_path / "old-nodes.jsonl.gz")]) == 0
    made = []

    def make_here(args, models, names, targets):
        """The recorded programs as ``models``', made and checked here."""
        made.append((sorted(models), sorted(names), args.warmup, args.iterations, args.processes))
        for model, strategy in itertools.product(models, names):
            made_here = results / "programs" / "synthetic_small" / f"{strategy}.pte"
            program = ResultsDir(args.out).program(model, strategy)
            shutil.copytree(made_here.parent, program.parent, dirs_exist_ok=True)
            _copy_node_map(made_here.with_suffix(".nodes.json"), program.with_suffix(".nodes.json"), model)
            RecordStore(args.out).append(make_record(model, strategy, "vulkan-run", "ok", model_digest="m",
                                                     strategy_digest=strategy, harness_digest="h",
                                                     environment={}, transitions=1))
        return [r for r in RecordStore(args.out).read() if r["model"] in models]

    monkeypatch.setattr(fitting, "sweep", make_here)
    runner = _executable(tmp_path / "executor_runner", RUNNER)
    out = tmp_path / "new"
    capsys.readouterr()
    assert cli.main(["calibrate", "--prior", str(prior), "--budget", "4", "--fp16", "--out", str(out), "--workers",
                     "0", "--device", "adb", "--adb", str(STANDIN_ADB), "--et-runner", str(runner), "--warmup", "1",
                     "--iterations", "2", "--processes", "2"]) == 0
    captured = capsys.readouterr()
    assert made == [(["synthetic_copy.fp16", "synthetic_small.fp16"], sorted(RECORDED), 1, 1, 1)]
    assert len(_runs(_calls(tmp_path))) == 4
    on_device = list(RecordStore(ResultsDir(out).device("emulator-5554")).read())
    assert sorted((r["model"], r["status"]) for r in on_device) == [(f"{model}.fp16", "ok") for model in sorted(models)
                                                                          for _ in RECORDED]
    assert all(r["environment"]["run_settings"]["processes"] == 2 for r in on_device)
    table = ResultsDir(ResultsDir(out).device("emulator-5554")).cost_table
    said = [line for line in captured.err.splitlines() if line.startswith("layoutbench: ")]
    assert said[-2].startswith('layoutbench: the prior does not hold on Mali-G715 "Immortalis": it predicts the 4 '
                               "programs within "), said
    assert said[-1].startswith(f'layoutbench: cost table of Mali-G715 "Immortalis" written to {table}: ')
    assert said[-1].endswith("programs of 2 models, and the prior transferred; its limits "
                             "{'maxImageDimension2D': 8192, 'maxImageDimension3D': 2048}")
    assert captured.out.splitlines()[-1] == str(table)


@pytest.mark.parametrize("options", [["--prior", "old.json", "--fit", "RUNS"], ["--prior", "old.json", "--pack", "OUT"],
                                     ["--models", "synthetic_small"], ["--top-up", "timm:resnest14d"]])
def test_calibrate_on_a_device_without_prior_or_with_fit_or_pack_is_one_line(tmp_path, capsys, options):
    assert cli.main(["calibrate", *options, "--device", "adb", "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "layoutbench: error: --device runs the programs --prior chooses on a device reached by adb and fits its "
        "table: add --prior TABLE, drop --fit/--pack"]
    assert not (tmp_path / "out").exists()
