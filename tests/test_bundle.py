"""``layoutbench pack`` and the bundle's ``run.sh``, which runs programs as remote_runner.py does
on a device with an executor_runner but no Python: under each POSIX shell here with a stand-in
runner (a few lines of sh), and under dash with the real runtime on this machine's Vulkan device
against remote_runner.py."""

import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from harness import cli
from harness.errors import UsageError
from harness.results.results_dir import ResultsDir
from harness.results.store import RecordStore, make_record
from harness.targets.vulkan.local.remote_import import import_remote
from harness.targets.vulkan.remote import packing, weightless
from harness.targets.vulkan.remote.remote_runner import etdump_paths, output_paths, runner_command

from .test_remote_runs import _program
from .test_vulkan_run import real_runner  # noqa: F401  (a fixture)

REPO = Path(__file__).resolve().parents[1]
STRATEGIES = ("all-width-packed", "bfs-downstream")  # in remote_runner.py's order, the programs' paths sorted
SHELLS = {"dash": ["dash"], "mksh": ["mksh"], "busybox": ["busybox", "sh"]}  # mksh: Android's /system/bin/sh
# A stand-in executor_runner: each process's arguments into $FAKE_LOG, the program it was handed
# into $FAKE_SAVE; a runner with the event tracer writes model.etdump, one without (FAKE_NO_ETDUMP)
# takes 0.1 s an execution, or, with $FAKE_CLOCK (the nanoseconds the stand-in `date` reads), moves
# that clock by $FAKE_INFERENCE_NS an execution at once; it writes two tensor outputs, numbered as
# executor_runner numbers them where the output between them is no tensor; $FAKE_FAIL in the program's path: it
# fails, as a runtime that rejects a program does. Its own sh is this machine's /bin/sh, whose
# arithmetic holds a clock's nanoseconds (64 bits).
STAND_IN = r"""#!/bin/sh
for arg; do printf '%s\n' "$arg"; done >> "$FAKE_LOG"; echo --- >> "$FAKE_LOG"
model=${1#--model_path=} count=${3#--num_executions=}
cp "$model" "$FAKE_SAVE/"
printf 'outputs of %s' "$(basename "$model")" > "${4#--output_file=}-0.bin"
printf 'its third output (the second, a number, no tensor)' > "${4#--output_file=}-2.bin"
case $model in *"${FAKE_FAIL:-@}"*) printf 'loading\n  Missing operator: aten.logical_not  \n\n' >&2; exit 3 ;; esac
if [ -z "$FAKE_NO_ETDUMP" ]; then printf 'executions %s' "$count" > model.etdump; exit 0; fi
if [ -n "$FAKE_CLOCK" ]; then echo $(($(cat "$FAKE_CLOCK") + count * FAKE_INFERENCE_NS)) > "$FAKE_CLOCK"; exit 0; fi
while [ "$count" -gt 0 ]; do sleep 0.1; count=$((count - 1)); done
"""
# The stand-in clock (`date +%s%N`, all run.sh asks of date) and `time -v`, which runs its command
# and reports $FAKE_KIB kilobytes as its peak resident memory, in GNU time's words.
FAKE_DATE = """#!/bin/sh
cat "$FAKE_CLOCK"
"""
FAKE_TIME = r"""#!/bin/sh
shift
"$@"
code=$?
printf '\tMaximum resident set size (kbytes): %s\n' "$FAKE_KIB" >&2
exit $code
"""
# vulkaninfo's device properties and limits, as Debian's vulkan-tools prints them (an earlier
# section names each device otherwise)
VULKANINFO = r"""#!/bin/sh
printf 'Presentable Surfaces:\n\tGPU id = 0 (llvmpipe (LLVM 15.0.6, 256 bits))\n'
printf 'GPU0:\nVkPhysicalDeviceProperties:\n\tdeviceType        = PHYSICAL_DEVICE_TYPE_CPU\n'
printf '\tdeviceName        = llvmpipe (LLVM 15.0.6, 256 bits)\n\tlimits:\n'
printf '\t\tmaxImageDimension1D      = 16384\n\t\tmaxImageDimension2D      = 16384\n'
printf '\t\tmaxImageDimension3D      = 4096\n\t\tmaxStorageBufferRange    = 134217728\n'
printf 'GPU1:\nVkPhysicalDeviceProperties:\n\tdeviceType        = PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU\n'
printf '\tdeviceName        = Mali-G715 "Immortalis"\n\tlimits:\n\t\tmaxImageDimension2D      = 8192\n'
printf '\t\tmaxImageDimension3D      = 2048\n'
"""


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    """synthetic_small's programs of two strategies where vulkan-run leaves them, with their records."""
    root = tmp_path_factory.mktemp("bundle")
    store = RecordStore(root / "results")
    for strategy in STRATEGIES:
        _program(root, "synthetic_small", strategy)
        store.append(make_record("synthetic_small", strategy, "vulkan-run", "ok", model_digest="m",
                                 strategy_digest=strategy, harness_digest="h", environment={}, transitions=1))
    return root / "results"


def _executable(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o755)
    return path


def _run_sh(shell: str, bundle: Path, runner: Path, out: Path, *options: str, **environment) -> subprocess.CompletedProcess:
    if not shutil.which(SHELLS[shell][0]):
        pytest.skip(f"no {shell} here (apt-get install {shell}) to run run.sh under")
    return subprocess.run([*SHELLS[shell], str(bundle / "run.sh"), str(runner), "--out", str(out), *options],
                          capture_output=True, text=True, env={**os.environ, **environment}, timeout=300)


@pytest.mark.parametrize("shell", SHELLS)
def test_run_sh_runs_each_program_as_remote_runner_does(results, tmp_path, shell):
    """Under dash, mksh and busybox's ash: the runner's flags as remote_runner.py passes them, each
    program refilled byte for byte as weightless.refill does, its ETDumps where import-remote reads
    them, a program the runtime rejects reported with the runner's last line, the device ET-VK picks
    (vulkaninfo's summary) and the settings in remote.json."""
    bundle, log, saved = tmp_path / "bundle", tmp_path / "log", tmp_path / "saved"
    saved.mkdir()
    assert packing.pack_bundle(results, bundle) == 2
    tools = tmp_path / "tools"
    tools.mkdir()
    runner = _executable(tools / "executor_runner", STAND_IN)
    _executable(tools / "vulkaninfo", VULKANINFO)
    done = _run_sh(shell, bundle, runner, tmp_path / "out", "--warmup", "2", "--iterations", "3", "--processes", "2",
                   FAKE_LOG=str(log), FAKE_SAVE=str(saved), FAKE_FAIL="bfs-downstream",
                   PATH=f"{tools}{os.pathsep}{os.environ['PATH']}")
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "out" / "remote.json").read_text())
    assert summary["device"] == 'Mali-G715 "Immortalis"'  # an integrated GPU before a CPU, as ET-VK picks
    assert summary["limits"] == {"maxImageDimension2D": 8192, "maxImageDimension3D": 2048}  # its own, as printed
    assert "limits" not in summary["unknown"] and "device" not in summary["unknown"]
    assert summary["settings"] == {"warmup": 2, "iterations": 3, "repeats": 3, "processes": 2}
    assert summary["made_by"] == "run.sh" and Path(summary["runner"]) == runner
    good, bad = (f"programs/synthetic_small/{strategy}.pte" for strategy in STRATEGIES)
    assert summary["programs"][bad] == {"error": f"executor_runner on {bad} exited with 3: "
                                                 "Missing operator: aten.logical_not"}
    run = summary["programs"][good]
    assert (run["etdump"], run["processes"], run["latencies_ms"]) == (True, 2, None)
    assert (run["rss_kib"] is None) == ("peak_rss_bytes" in summary["unknown"])
    kept = [p.relative_to(tmp_path / "out") for p in sorted((tmp_path / "out" / "programs").rglob("*.etdump"))]
    assert kept == sorted(etdump_paths(Path(good), 2))
    assert (tmp_path / "out" / kept[0]).read_text() == "executions 5"
    calls = [call.strip("\n").split("\n") for call in log.read_text().split("---\n") if call]
    assert len(calls) == 3  # two processes of the program that runs, one of the one that fails
    for call, program in zip(calls, [good, good, bad]):
        runnable = Path(call[0].removeprefix("--model_path="))
        inputs = [str(bundle / ResultsDir.beside(Path(program), "inputs") / "input-0.bin")]
        assert call == runner_command(runner, runnable, inputs, 5, runnable.parent)[1:]
        original = (results / program).read_bytes()
        stripped, manifest = weightless.strip(original)
        refilled = bytearray(stripped)
        weightless.refill(refilled, manifest)
        assert (saved / runnable.name).read_bytes() == refilled and len(refilled) == len(original)
    assert not (tmp_path / "out" / ".work").exists()
    picked = _run_sh(shell, bundle, runner, tmp_path / "out", "--processes", "1", FAKE_LOG=str(log),
                     FAKE_SAVE=str(saved), ETVK_DEVICE_INDEX="0", PATH=f"{tools}{os.pathsep}{os.environ['PATH']}")
    summary = json.loads((tmp_path / "out" / "remote.json").read_text())
    assert summary["device"].startswith("llvmpipe"), picked.stderr
    assert summary["limits"] == {"maxImageDimension2D": 16384, "maxImageDimension3D": 4096,
                                 "maxStorageBufferRange": 134217728}
    assert len(list((tmp_path / "out" / "programs").rglob("*.etdump"))) == 2  # the earlier run's are gone


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize("weights", [True, False], ids=["with weights", "weightless"])
def test_run_sh_brings_back_the_outputs_of_programs_packed_with_their_weights(results, tmp_path, shell, weights):
    """pack --bundle --weights: each program runs as it was made, its cut not copied, and its last
    execution's tensor outputs come back numbered from 0 where import-remote reads them (the
    runner skips a number for an output that is no tensor); weightless, the outputs of random
    weights are left there (null in remote.json)."""
    bundle, log, saved = tmp_path / "bundle", tmp_path / "log", tmp_path / "saved"
    saved.mkdir()
    packing.pack_bundle(results, bundle, weights=weights)
    assert not list(bundle.glob("fill/*")) if weights else list(bundle.glob("fill/*"))
    runner = _executable(tmp_path / "executor_runner", STAND_IN)
    done = _run_sh(shell, bundle, runner, tmp_path / "out", "--processes", "1", "--device", "d",
                   FAKE_LOG=str(log), FAKE_SAVE=str(saved))
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "out" / "remote.json").read_text())
    for strategy in STRATEGIES:
        name = f"programs/synthetic_small/{strategy}.pte"
        assert summary["programs"][name]["outputs"] == (2 if weights else None)
        if weights:
            assert (saved / f"{strategy}.cut").read_bytes() == (results / name).read_bytes()
            first, second = (tmp_path / "out" / path for path in output_paths(Path(name), 2))
            assert first.read_text() == f"outputs of {strategy}.cut" and second.read_text().startswith("its third")
    assert bool(list((tmp_path / "out").rglob("*.outputs"))) == weights


def test_run_sh_only_runs_the_program_it_is_given(results, tmp_path):
    """--only PROGRAM (a run over adb runs and brings back one program at a time): that program
    alone, under mksh; a name the bundle does not hold, one line, exit 2."""
    bundle, saved = tmp_path / "bundle", tmp_path / "saved"
    saved.mkdir()
    packing.pack_bundle(results, bundle)
    runner = _executable(tmp_path / "executor_runner", STAND_IN)
    second = f"programs/synthetic_small/{STRATEGIES[1]}.pte"
    done = _run_sh("mksh", bundle, runner, tmp_path / "out", "--only", second, "--processes", "1", "--device", "a GPU",
                   FAKE_LOG=str(tmp_path / "log"), FAKE_SAVE=str(saved))
    assert done.returncode == 0, done.stderr
    assert list(json.loads((tmp_path / "out" / "remote.json").read_text())["programs"]) == [second]
    assert f"run.sh: [1/1] {second}: 1 ETDumps written" in done.stderr.splitlines()
    assert [p.name for p in saved.iterdir()] == [f"{STRATEGIES[1]}.pte"]
    wrong = _run_sh("mksh", bundle, runner, tmp_path / "wrong", "--only", "programs/m/s.pte")
    assert wrong.returncode == 2 and wrong.stderr.splitlines() == [
        f"run.sh: error: --only programs/m/s.pte: no such program in {bundle}/programs.list"]


def test_run_sh_times_a_runner_without_the_event_tracer_by_wall_clock(results, tmp_path):
    """A runner that writes no ETDump: run.sh sends the clock's readings around 1 and around
    iterations + 1 executions, raw; import-remote takes their differences, as remote_runner.py does."""
    bundle, saved = tmp_path / "bundle", tmp_path / "saved"
    saved.mkdir()
    packing.pack_bundle(results, bundle)
    runner = _executable(tmp_path / "executor_runner", STAND_IN)
    done = _run_sh("dash", bundle, runner, tmp_path / "out", "--iterations", "2", "--device", "a GPU",
                   FAKE_LOG=str(tmp_path / "log"), FAKE_SAVE=str(saved), FAKE_NO_ETDUMP="1")
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "out" / "remote.json").read_text())
    assert summary["device"] == "a GPU" and "device" not in summary["unknown"]
    assert summary["limits"] is None and "import-remote --limits" in summary["unknown"]["limits"]  # no such device
    walls = {}
    for name, run in summary["programs"].items():
        assert not run["etdump"] and len(run["clocks_ns"]) == 3
        walls[name] = [(end - start, end_many - start_many) for start, end, start_many, end_many in run["clocks_ns"]]
        assert all(one >= 0.1e9 and many >= 0.3e9 for one, many in walls[name])  # 0.1 s an execution
    for record in import_remote(results, tmp_path / "out", tmp_path / "imported"):
        assert record["latency_source"] == "wall-clock" and record["status"] == "ok"
        assert record["latency_ms_median"] == pytest.approx(statistics.median(
            (many - one) / 2 / 1e6 for one, many in walls[f"programs/synthetic_small/{record['strategy']}.pte"]
            if many > one))


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize("seconds", [3, 1])
def test_run_sh_leaves_the_arithmetic_of_long_runs_and_large_peaks_to_import_remote(results, tmp_path, shell, seconds):
    """mksh, Android's sh, computes in 32 bits: run.sh writes the clock's readings (nanoseconds since
    1970, past 2**60) and the kilobytes of peak memory as read, and import-remote computes. A runner
    without the event tracer taking 3 s (or 1 s) an inference, on a clock that the stand-in runner
    moves, and a peak of 2.3 GiB: 3000 ms (1000 ms) and 2,469,605,376 bytes under every shell. A
    setting past 9 digits, which mksh would wrap (2**32 + 2 iterations to 2), is refused."""
    bundle, saved, tools = tmp_path / "bundle", tmp_path / "saved", tmp_path / "tools"
    saved.mkdir()
    tools.mkdir()
    packing.pack_bundle(results, bundle)
    runner = _executable(tools / "executor_runner", STAND_IN)
    _executable(tools / "date", FAKE_DATE)
    _executable(tools / "time", FAKE_TIME)
    (tmp_path / "clock").write_text("1732851234123456789\n")
    kib = 2_411_724  # 2.3 GiB
    done = _run_sh(shell, bundle, runner, tmp_path / "out", "--iterations", "2", "--repeats", "1", "--device", "a GPU",
                   FAKE_LOG=str(tmp_path / "log"), FAKE_SAVE=str(saved), FAKE_NO_ETDUMP="1",
                   FAKE_CLOCK=str(tmp_path / "clock"), FAKE_INFERENCE_NS=str(seconds * 10**9), FAKE_KIB=str(kib),
                   PATH=f"{tools}{os.pathsep}{os.environ['PATH']}")
    assert done.returncode == 0, done.stderr
    for record in import_remote(results, tmp_path / "out", tmp_path / "imported"):
        assert record["status"] == "ok", record["reason"]
        assert (record["latency_ms_median"], record["peak_rss_bytes"]) == (seconds * 1000, kib * 1024)
    wrapped = _run_sh(shell, bundle, runner, tmp_path / "wrapped", "--iterations", str(2**32 + 2))
    assert wrapped.returncode == 2 and wrapped.stderr.splitlines() == [
        f"run.sh: error: --iterations takes a whole number of at most 9 digits, not '{2**32 + 2}'"]


@pytest.mark.parametrize("shell", SHELLS)
def test_run_sh_splices_programs_from_past_4_gib_of_their_cut(results, tmp_path, shell):
    """Where a program is past 2 GiB its positions are past 32 bits, which mksh (Android's sh) wraps:
    pack writes every position, and run.sh only hands them to tail and head. Each cut here is moved
    4 GiB into a sparse file (a hole first, no disk) and its .splices says so: the programs the
    runner is handed are still byte for byte what weightless.refill makes."""
    bundle, saved = tmp_path / "bundle", tmp_path / "saved"
    saved.mkdir()
    packing.pack_bundle(results, bundle)
    hole = (1 << 32) + 12_345
    for strategy in STRATEGIES:
        cut, splices = (bundle / "programs" / "synthetic_small" / f"{strategy}{suffix}"
                        for suffix in (packing.CUT_SUFFIX, packing.SPLICES_SUFFIX))
        kept = cut.read_bytes()
        with cut.open("wb") as sparse:
            sparse.seek(hole)
            sparse.write(kept)
        lines = [line.split(" ", 1) for line in splices.read_text().splitlines()]
        splices.write_text("".join(f"{int(start) + hole} {rest}\n" for start, rest in lines))
    runner = _executable(tmp_path / "executor_runner", STAND_IN)
    done = _run_sh(shell, bundle, runner, tmp_path / "out", "--processes", "1", "--device", "a GPU",
                   FAKE_LOG=str(tmp_path / "log"), FAKE_SAVE=str(saved))
    assert done.returncode == 0, done.stderr
    for strategy in STRATEGIES:
        stripped, manifest = weightless.strip(ResultsDir(results).program("synthetic_small", strategy).read_bytes())
        refilled = bytearray(stripped)
        weightless.refill(refilled, manifest)
        assert (saved / f"{strategy}.pte").read_bytes() == refilled


def test_the_limits_given_to_run_sh_or_import_remote_are_the_records(results, tmp_path):
    """Limits where no vulkaninfo reads them: run.sh --limits writes them (in remote_runner.py's
    order); run.sh without states none and says why, and import-remote --limits states them in the
    records; limits malformed, one line, exit 2, nothing run."""
    from costmodel.device_limits import DeviceLimits

    bundle, saved = tmp_path / "bundle", tmp_path / "saved"
    saved.mkdir()
    packing.pack_bundle(results, bundle)
    runner = _executable(tmp_path / "executor_runner", STAND_IN)
    fake = {"FAKE_LOG": str(tmp_path / "log"), "FAKE_SAVE": str(saved), "FAKE_NO_ETDUMP": "1"}  # import reads no ETDump
    given = "maxStorageBufferRange=1073741824,maxImageDimension3D=2048"
    done = _run_sh("dash", bundle, runner, tmp_path / "given", "--device", "a GPU", f"--limits={given}",
                   "--iterations=1", "--repeats=1", **fake)
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "given" / "remote.json").read_text())
    assert list(summary["limits"].items()) == [("maxImageDimension3D", 2048), ("maxStorageBufferRange", 1073741824)]
    assert "limits" not in summary["unknown"]
    done = _run_sh("dash", bundle, runner, tmp_path / "none", "--device", "a GPU", "--iterations=1", "--repeats=1", **fake)
    assert done.returncode == 0, done.stderr
    stated = DeviceLimits.parse("maxImageDimension3D=2048")
    for record in import_remote(results, tmp_path / "none", tmp_path / "stated", limits=stated):
        assert record["environment"]["vulkan_limits"] == {"maxImageDimension3D": 2048}
    for record in import_remote(results, tmp_path / "none", tmp_path / "unstated"):
        assert record["environment"]["vulkan_limits"] is None
    for wrong, says in [("maxImageDimension3D=0", "expected NAME=NUMBER (a whole number > 0), not 'maxImageDimension3D=0'"),
                        ("maxTexels=9", "unknown device limit 'maxTexels'")]:
        done = _run_sh("dash", bundle, runner, tmp_path / "wrong", "--limits", wrong, **fake)
        assert done.returncode == 2 and len(done.stderr.splitlines()) == 1 and says in done.stderr, done.stderr
        assert not (tmp_path / "wrong" / "remote.json").exists()


def test_pack_is_one_quiet_line_and_refuses_in_one(results, tmp_path):
    """pack as a command: one line on stderr (no library warnings), the packed path on stdout; what it
    cannot do, one line, exit 2, nothing written."""
    python = [sys.executable, "-m", "harness.cli"]
    done = subprocess.run([*python, "pack", str(results), str(tmp_path / "p.tar.xz")], capture_output=True, text=True,
                          env={**os.environ, "PYTHONWARNINGS": "default"}, cwd=REPO)
    assert (done.returncode, done.stdout) == (0, f"{tmp_path / 'p.tar.xz'}\n")
    assert done.stderr.splitlines() == [f"layoutbench: 2 programs, without their weights, packed into "
                                        f"{tmp_path / 'p.tar.xz'}, a tar for remote_runner.py"]
    with tarfile.open(tmp_path / "p.tar.xz") as tar:
        names = set(tar.getnames())
    assert {f"programs/synthetic_small/{s}{suffix}" for s in STRATEGIES for suffix in (".pte", ".weights.json")} <= names
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    for argv, message in [
        (["pack", str(results), str(tmp_path / "b"), "--runner", sys.executable], "--runner goes into a bundle: add "
         "--bundle"),
        (["pack", str(tmp_path), str(tmp_path / "b.tar")], f"no programs under {tmp_path / 'programs'}: run "
         f"--target vulkan-run into {tmp_path} first"),
        (["pack", str(results), str(tmp_path / "b")], f"{tmp_path / 'b'}: name a .tar, .tar.gz or .tar.xz (add "
         "--bundle for a directory)"),
        (["pack", str(results), str(tmp_path / "full"), "--bundle"], f"{tmp_path / 'full'} exists and is not an "
         "empty directory: name a new one, or a .tar, .tar.gz or .tar.xz"),
    ]:
        with pytest.raises(UsageError) as refused:
            cli.COMMANDS["pack"](cli._parser().parse_args(argv))
        assert str(refused.value) == message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["full", "p.tar.xz"]


def test_a_bundle_tar_holds_the_runner_and_the_script_executable(results, tmp_path):
    runner = _executable(tmp_path / "android_runner", "#!/bin/sh\n")
    assert packing.pack_bundle(results, tmp_path / "b.tar.gz", runner) == 2
    with tarfile.open(tmp_path / "b.tar.gz") as tar:
        members = {m.name: m for m in tar.getmembers()}
    assert members["run.sh"].mode == members["executor_runner"].mode == 0o755
    assert {"programs.list", "fill/FLOAT32.bin", "programs/synthetic_small/bfs-downstream.cut",
            "programs/synthetic_small/bfs-downstream.splices"} <= set(members)
    original = (results / "programs" / "synthetic_small" / "bfs-downstream.pte").read_bytes()
    weights = sum(region["size"] for region in packing._places(weightless.strip(original)[1]))
    assert members["programs/synthetic_small/bfs-downstream.cut"].size == len(original) - weights > 0


def _timed_executions(etdumps: list[Path], iterations: int, transition: list[bool]) -> dict[str, list[float]]:
    """Every timed execution of every process, in ms: its latency, its dispatches' summed GPU time
    and its transitions' (``transition``: per dispatch, in read_dispatches' order), the GPU times
    read with ExecuTorch's Inspector."""
    from executorch.devtools import Inspector

    from harness.targets.vulkan.local.dispatches import _dispatch_event
    from harness.targets.vulkan.local.latency import read_runtime_times

    timed = {"latency_ms_median": [], "gpu_dispatch_ms": [], "transition_gpu_ms": []}
    for etdump in etdumps:
        timed["latency_ms_median"] += read_runtime_times(etdump).latency_ms[-iterations:]
        dispatches = [event.perf_data.raw for block in Inspector(etdump_path=str(etdump)).event_blocks
                      for event in block.events if event.perf_data is not None and _dispatch_event(event.name)]
        executions = list(zip(*dispatches))[-iterations:]
        timed["gpu_dispatch_ms"] += [float(sum(times)) for times in executions]
        timed["transition_gpu_ms"] += [float(sum(t for t, moved in zip(times, transition) if moved))
                                       for times in executions]
    return timed


def test_run_sh_under_dash_gives_the_records_remote_runner_py_gives(results, tmp_path, real_runner):
    """The same programs run by remote_runner.py and by run.sh under dash, in turn (py, sh, py, sh,
    py), on this machine's Vulkan device, each run imported: the same records but for what a run
    measures (the same identity: device, machine, runner and settings), the same dispatches
    attributed to the same nodes in every ETDump, peak memory within 10 %; run.sh's latency, summed
    GPU time and transitions' GPU time (the median of its runs' records) within the spread of every
    timed execution of remote_runner.py's runs. On lavapipe on a shared CPU the machine's load moves
    one run's times by up to 10x against the next's: runs in turn share it, and where run.sh's runs
    alone met a burst of it, two runs more (run.sh, remote_runner.py), up to three times, and all of
    them judge."""
    from harness.targets.vulkan.local.dispatches import read_dispatches
    from harness.targets.vulkan.local.latency import LATENCY_FIELDS
    from harness.targets.vulkan.local.remote_import import RUN_FIELDS
    from harness.targets.vulkan.remote.device import vulkan_device, vulkan_limits
    from harness.targets.vulkan.local.dispatches import read_node_map

    settings = {"warmup": 1, "iterations": 4, "processes": 2}
    options = [f"--{name}={value}" for name, value in settings.items()]
    packing.pack(results, tmp_path / "pack.tar")
    with tarfile.open(tmp_path / "pack.tar") as tar:
        tar.extractall(tmp_path / "packed", filter="data")
    packing.pack_bundle(results, tmp_path / "bundle")
    # the device and limits remote_runner.py finds, where run.sh has no vulkaninfo to read them from
    limits = ",".join(f"{name}={value}" for name, value in vulkan_limits().items())
    device = [] if shutil.which("vulkaninfo") else ["--device", vulkan_device(), "--limits", limits]
    columns = ["partition", "node_id", "node", "operator", "kernel", "transition"]
    records, timed = {"py": [], "sh": []}, {}
    def run(index: int, tool: str) -> None:
        """One run of a runner, imported; its dispatches attributed as every other run's, its timed
        executions kept."""
        if tool == "py":  # a script of its own, as on another machine: a child of this process would count
            # this process's resident memory in its peak (a child's maxrss includes what it exec'd from)
            returned = tmp_path / f"{index}.tar"
            done = subprocess.run([sys.executable, str(REPO / "harness/targets/vulkan/remote/remote_runner.py"),
                                   str(tmp_path / "packed"), str(real_runner.path), str(returned), *options],
                                  capture_output=True, text=True)
        else:
            returned = tmp_path / str(index)
            done = _run_sh("dash", tmp_path / "bundle", real_runner.path, returned, *options, *device)
        assert done.returncode == 0, done.stderr
        out = tmp_path / f"import-{index}"
        records[tool].append({r["strategy"]: r for r in import_remote(results, returned, out)})
        for strategy in STRATEGIES:
            etdumps = etdump_paths(ResultsDir(out).program("synthetic_small", strategy), settings["processes"])
            nodes = read_node_map(ResultsDir(results).program("synthetic_small", strategy))
            attributed = [read_dispatches(etdump, nodes)[columns] for etdump in etdumps]
            reference = timed.setdefault(("attributed", strategy), attributed[0])
            assert all(frame.equals(reference) for frame in attributed), f"{tool} run {index}: other dispatches"
            for name, values in _timed_executions(etdumps, settings["iterations"], list(reference["transition"])).items():
                timed.setdefault((tool, strategy, name), []).extend(values)

    def outside() -> list[str]:
        """Where the median of run.sh's records lies outside every timed execution of remote_runner.py."""
        found = []
        for strategy, name in itertools.product(STRATEGIES, ("latency_ms_median", "gpu_dispatch_ms", "transition_gpu_ms")):
            value, around = statistics.median(run[strategy][name] for run in records["sh"]), timed["py", strategy, name]
            print(f"{strategy} {name}: run.sh {value:.3f}, remote_runner.py {min(around):.3f}..{max(around):.3f} "
                  f"(its runs' records {', '.join(f'{run[strategy][name]:.3f}' for run in records['py'])})")
            if not min(around) <= value <= max(around):
                found.append(f"{strategy}: run.sh's {name} {value:.3f} outside {min(around):.3f}..{max(around):.3f}")
        return found

    for index, tool in enumerate(["py", "sh", "py", "sh", "py"]):
        run(index, tool)
    for strategy in STRATEGIES:
        py_record, sh_record = records["py"][0][strategy], records["sh"][0][strategy]
        assert sh_record["status"] == py_record["status"] == "ok", (sh_record["reason"], py_record["reason"])
        measured = {*RUN_FIELDS, "run_note", "timestamp"}
        assert {k: v for k, v in sh_record.items() if k not in measured} == \
            {k: v for k, v in py_record.items() if k not in measured}
        assert sh_record["attribution_error"] is None and set(LATENCY_FIELDS) <= set(sh_record)
        assert sh_record["peak_rss_bytes"] == pytest.approx(py_record["peak_rss_bytes"], rel=0.1)
    for index in range(5, 11, 2):  # a burst of load on run.sh's runs alone: two runs more, all of them judged
        if not outside():
            break
        run(index, "sh")
        run(index + 1, "py")
    assert not outside(), outside()
