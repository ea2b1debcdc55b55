"""The emulated arm64 device (tests/helpers/arm64_device.py) through the stand-in adb: its shell an
arm64 mksh under qemu-user, the programs that shell starts arm64 under qemu too, its Vulkan GPU
arm64 lavapipe, which run.sh finds and reads there; in the full tier, ``run --device adb`` with the
runner cross-built for aarch64 (``runtime build --toolchain``) running on it."""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness import cli
from harness.targets.vulkan.local.runners import built_runners

from .helpers import arm64_device
from .test_adb_device import MEASURED, STANDIN_ADB, but_for, run_on_device_and_with_remote_runner_py
from .test_bundle import _executable
from .test_vulkan_run import real_runner  # noqa: F401  (a fixture)

RUN_SH = Path(cli.__file__).parent / "targets" / "vulkan" / "remote" / "remote_runner.sh"
BUILT_FOR = "Linux aarch64"  # build.json's "built_for" of a runner cross-built for the device


@pytest.fixture
def arm64(tmp_path, monkeypatch) -> Path:
    """The emulated device's filesystem, the stand-in adb's environment made its."""
    try:
        environment = arm64_device.environment(tmp_path / "device")
    except arm64_device.Unavailable as missing:
        pytest.skip(str(missing))
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    return tmp_path / "device"


def _shell(command: str) -> str:
    """What ``adb shell command`` prints on the device."""
    done = subprocess.run([sys.executable, str(STANDIN_ADB), "shell", command], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_emulated_device_s_shell_and_the_programs_it_starts_are_arm64(arm64):
    """Its shell is the arm64 mksh, and a shell that shell starts runs an arm64 uname: qemu follows
    each program the device starts (binfmt_misc), not only the first."""
    mksh = arm64_device.programs() / arm64_device.PACKAGES["mksh"]
    said = _shell("uname -m; sh -c 'uname -m'; readlink $(command -v sh); echo $KSH_VERSION").splitlines()
    assert said[:3] == ["aarch64", "aarch64", str(mksh)] and said[3].startswith("@(#)MIRBSD KSH ")


def test_run_sh_on_the_emulated_device_finds_arm64_lavapipe_and_reads_its_limits(arm64):
    """The device's vulkaninfo (arm64, under qemu) names llvmpipe; run.sh, run there by its mksh with
    busybox's utilities, reads the same device and the limits that vulkaninfo prints."""
    assert re.search(r"deviceName\s+= llvmpipe", _shell("vulkaninfo --summary 2>/dev/null"))
    printed = dict(re.findall(r"(maxImageDimension2D|maxImageDimension3D|maxStorageBufferRange)\s+= (\d+)",
                              _shell("vulkaninfo 2>/dev/null")))
    bundle = arm64 / "data" / "local" / "tmp" / "bundle"  # one with no program: run.sh reads the device alone
    bundle.mkdir(parents=True)
    shutil.copyfile(RUN_SH, bundle / "run.sh")
    (bundle / "programs.list").write_text("")
    _executable(bundle / "executor_runner", "#!/bin/sh\n")
    remote = json.loads(_shell("cd /data/local/tmp/bundle && sh run.sh --out /data/local/tmp/out >/dev/null && "
                               "cat /data/local/tmp/out/remote.json"))
    assert remote["device"].startswith("llvmpipe (") and remote["unknown"] == {}
    assert remote["limits"] == {name: int(value) for name, value in printed.items()} and len(printed) == 3


@pytest.mark.slow
def test_the_cross_built_runner_on_the_emulated_device_gives_the_records_remote_runner_py_gives(
        tmp_path, arm64, real_runner, capsys):
    """synthetic_small x two strategies made and checked here, then run by the aarch64 runner under the
    device's mksh (run --device adb): records with latency and GPU time from the ETDumps pulled back,
    outputs computed there within tolerance of eager's, and otherwise the records remote_runner.py
    gives for the same programs on the host's runner but for what a run measures and what names
    the other device (its GPU and limits, its runner, and so the identity)."""
    cross = [path for path, build in built_runners() if build.get("built_for") == BUILT_FOR]
    if not cross:
        pytest.skip(f"no executor_runner built for {BUILT_FOR}: layoutbench runtime build --toolchain "
                    "docs/toolchains/aarch64-linux-gnu.cmake")
    device_named = {"vulkan_device", "vulkan_limits", "runtime"}
    for device_record, record in run_on_device_and_with_remote_runner_py(tmp_path, capsys, cross[0],
                                                                         real_runner.path):
        assert 0 < device_record["transition_gpu_ms"] < device_record["gpu_dispatch_ms"]
        assert device_record["environment"]["vulkan_device"].startswith("llvmpipe (")
        assert device_record["environment"]["vulkan_device"] != record["environment"]["vulkan_device"]
        assert but_for(device_record["environment"], device_named) == but_for(record["environment"], device_named)
        assert but_for(device_record, {*MEASURED, "environment", "identity"}) == \
            but_for(record, {*MEASURED, "environment", "identity"})
