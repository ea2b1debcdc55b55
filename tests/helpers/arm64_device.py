"""The emulated arm64 device, a test fixture (no phone, no board): the stand-in adb's device
(:mod:`tests.helpers.standin_adb`) made an arm64 Linux one, everything on it run by qemu-user.

- **Its programs.** Debian's arm64 ``mksh`` (its shell, Android's), ``busybox`` (its utilities,
  as toybox is a phone's) and ``vulkan-tools`` (its ``vulkaninfo``), fetched with ``apt-get
  download`` and unpacked with ``dpkg -x`` into the cache's ``arm64-device/``: ``mksh:arm64``
  cannot be installed beside the host's ``mksh``.
- **qemu for every program, not only the first.** ``qemu-aarch64 PROGRAM`` runs one arm64
  program, but an arm64 program that program starts (``sh run.sh``, the runner) goes to the
  host's kernel, which cannot run it: qemu-user does not follow ``execve``. Registering
  ``qemu-aarch64`` with the kernel's ``binfmt_misc`` (as Debian's ``qemu-user-binfmt`` does,
  its flag F: the interpreter opened once, at registration) hands every arm64 ELF to qemu, the
  device's shell included; host programs still run natively.
- **Its libraries.** Debian's multiarch arm64 packages (``libc6:arm64``, ``libstdc++6:arm64``,
  ``libvulkan1:arm64``, ``mesa-vulkan-drivers:arm64``: ``make system-deps``), found by qemu where
  the programs name them (``/lib/ld-linux-aarch64.so.1``), so no ``-L`` or ``QEMU_LD_PREFIX``.
- **Its GPU.** arm64 lavapipe: ``VK_DRIVER_FILES`` (and ``VK_ICD_FILENAMES``, the older loaders'
  name) name its ICD alone, in the environment of the device's shell only (the stand-in's
  command prefix), since the host's lavapipe checks the programs here at the same time.

``python -m tests.helpers.arm64_device`` (``make arm64-device``) makes what is missing, saying
nothing when all is there; the tests skip, saying why, where something is.
"""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from layoutkit.files import CacheSettings, cache_folder, cache_root, install

PACKAGES = {"mksh": "bin/mksh", "busybox": "bin/busybox", "vulkan-tools": "usr/bin/vulkaninfo"}  # what each gives
ICD = "/usr/share/vulkan/icd.d/lvp_icd.aarch64.json"  # mesa-vulkan-drivers:arm64's lavapipe
QEMU = "/usr/bin/qemu-aarch64"
BINFMT = Path("/proc/sys/fs/binfmt_misc")
# qemu's scripts/qemu-binfmt-conf.sh: an aarch64 ELF's header and the bits of it that say so
AARCH64_MAGIC = r"\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00"
AARCH64_MASK = r"\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff"
REGISTRATION = f":qemu-aarch64:M::{AARCH64_MAGIC}:{AARCH64_MASK}:{QEMU}:F"
KIND = "arm64-device"  # its folder in the cache


class Unavailable(Exception):
    """What this machine lacks to emulate the device, and what makes it (one line)."""


def programs() -> Path:
    """The unpacked arm64 packages (their root); Unavailable where they are not."""
    root = cache_root() / KIND / "root"
    if not all((root / path).is_file() for path in PACKAGES.values()):
        raise Unavailable(f"no arm64 mksh, busybox and vulkaninfo in {root}: make arm64-device unpacks them")
    return root


def check_emulation() -> None:
    """Unavailable where qemu-user or its binfmt_misc registration is missing, or the arm64 lavapipe."""
    if not os.access(QEMU, os.X_OK):
        raise Unavailable(f"no {QEMU}: apt-get install qemu-user (make system-deps)")
    if not os.path.exists(ICD):
        raise Unavailable(f"no arm64 lavapipe ({ICD}): apt-get install mesa-vulkan-drivers:arm64 (make system-deps)")
    if not _registered():
        raise Unavailable("qemu-aarch64 is not registered with binfmt_misc, so an arm64 program cannot start "
                          "another: make arm64-device (as root) registers it")


def _registered() -> bool:
    entry = BINFMT / "qemu-aarch64"
    return entry.is_file() and entry.read_text().startswith("enabled")


def environment(root: Path) -> dict[str, str]:
    """The stand-in adb's environment for an arm64 device whose filesystem is ``root``: its shell
    the arm64 mksh, its /system/bin busybox's utilities and vulkaninfo, its GPU arm64 lavapipe.
    Unavailable where this machine cannot emulate it."""
    check_emulation()
    unpacked = programs()
    system_bin = root / "system" / "bin"
    system_bin.mkdir(parents=True, exist_ok=True)
    busybox = unpacked / PACKAGES["busybox"]
    applets = subprocess.run([str(busybox), "--list"], capture_output=True, text=True, check=True).stdout.split()
    for name, target in [*((applet, busybox) for applet in applets if applet != "sh"),
                         ("vulkaninfo", unpacked / PACKAGES["vulkan-tools"])]:
        if not (system_bin / name).is_symlink():
            (system_bin / name).symlink_to(target)
    return {"STANDIN_ADB_ROOT": str(root), "STANDIN_ADB_SHELL": str(unpacked / PACKAGES["mksh"]),
            "STANDIN_ADB_EXEC": f"env VK_DRIVER_FILES={ICD} VK_ICD_FILENAMES={ICD}"}


def unpack(say) -> None:
    """The arm64 packages fetched and unpacked into the cache, where they are not."""
    folder = cache_folder(KIND)
    root = folder / "root"
    if all((root / path).is_file() for path in PACKAGES.values()):
        return
    say(f"unpacking Debian's arm64 {', '.join(PACKAGES)} into {root}")
    with tempfile.TemporaryDirectory(dir=folder) as downloads:
        fetched = subprocess.run(["apt-get", "download", *(f"{name}:arm64" for name in PACKAGES)], cwd=downloads,
                                 capture_output=True, text=True)
        if fetched.returncode:
            said = (fetched.stderr.strip().splitlines() or ["no message"])[-1]
            raise Unavailable(f"apt-get download of the arm64 packages failed ({said}): add the architecture "
                              "(make system-deps does: dpkg --add-architecture arm64, apt-get update)")
        shutil.rmtree(root, ignore_errors=True)
        for package in sorted(Path(downloads).glob("*.deb")):
            subprocess.run(["dpkg", "-x", str(package), str(root)], check=True)


def register(say) -> None:
    """qemu-aarch64 registered with binfmt_misc (mounted first where it is not), where it is not."""
    if _registered():
        return
    if os.geteuid():
        raise Unavailable("qemu-aarch64 is not registered with binfmt_misc and only root may register it: "
                          "sudo make arm64-device")
    if not (BINFMT / "register").exists():
        mounted = subprocess.run(["mount", "-t", "binfmt_misc", "binfmt_misc", str(BINFMT)], capture_output=True,
                                 text=True)
        if mounted.returncode:
            raise Unavailable(f"binfmt_misc cannot be mounted here ({mounted.stderr.strip()}): on a container, "
                              "register qemu-user-binfmt on its host")
    say(f"registering {QEMU} with binfmt_misc for arm64 programs")
    if (BINFMT / "qemu-aarch64").is_file():  # registered, but disabled
        (BINFMT / "qemu-aarch64").write_text("1")
    else:
        (BINFMT / "register").write_text(REGISTRATION)


def main() -> int:
    def say(line: str) -> None:
        print(f"arm64-device: {line}", file=sys.stderr)

    install(CacheSettings.from_environment(os.environ))  # $LAYOUTBENCH_CACHE_DIR's, as the tests link it
    try:
        unpack(say)
        register(say)
        check_emulation()
    except Unavailable as missing:
        say(str(missing))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
