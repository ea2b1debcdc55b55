#!/usr/bin/env python3
"""A stand-in for Android's ``adb``, a test fixture: ``devices``, ``get-state``, ``-s SERIAL``,
``push [--sync]``, ``pull`` and ``shell CMD`` over a directory that plays the device's filesystem,
as the real one answers them (its messages, its exit codes, where push and pull put a directory).

Its environment says what the device is:

- ``STANDIN_ADB_ROOT``: the device's filesystem; a device path ``/P`` is ``$STANDIN_ADB_ROOT/P``,
  and in a shell command ``/data/local/tmp`` is mapped so.
- ``STANDIN_ADB_DEVICES``: the devices attached, ``SERIAL=STATE,...`` (STATE as ``adb devices``
  prints it: device, unauthorized, offline); default ``emulator-5554=device``.
- ``STANDIN_ADB_SHELL``: the device's shell (default mksh, Android's, where installed, else sh);
  it is also ``sh`` on the shell's PATH, as /system/bin/sh is on Android.
- ``STANDIN_ADB_EXEC``: a command prefix the shell runs under (default: none), e.g. ``env
  VK_DRIVER_FILES=...``: the device's own environment. An arm64 device (an arm64 mksh as
  ``STANDIN_ADB_SHELL``, the programs it starts arm64 too, all under qemu) is
  :mod:`tests.helpers.arm64_device`'s.
- ``STANDIN_ADB_FAIL_AFTER``: a dropped connection: every call after the N-th fails as the real
  one does when the device is gone; a pull that fails so has pulled half its files first.
- ``STANDIN_ADB_LOG``: each call's arguments appended there, a JSON list a line.
"""

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

DEVICE_TMP = "/data/local/tmp"


def fail(message: str) -> None:
    print(f"adb: error: {message}", file=sys.stderr)
    sys.exit(1)


def on_host(root: Path, device_path: str) -> Path:
    if not device_path.startswith("/"):
        fail(f"{device_path}: a device path is absolute")
    return root / device_path.lstrip("/")


def files_under(path: Path) -> list[Path]:
    return sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]


def copy(source: Path, target: Path, sync: bool, only: int | None = None) -> tuple[int, int]:
    """``source`` (a file or a directory) copied as adb copies it: into ``target`` where that is a
    directory, else to it; with ``sync``, a file whose copy there has its size and time is skipped.
    (pushed, skipped); ``only``: the first so many files copied, then none."""
    if target.is_dir():
        target = target / source.name
    pushed = skipped = 0
    for file in files_under(source):
        place = target / file.relative_to(source) if source.is_dir() else target
        if only is not None and pushed + skipped >= only:
            break
        if sync and place.is_file() and (place.stat().st_size, int(place.stat().st_mtime)) == (
                file.stat().st_size, int(file.stat().st_mtime)):
            skipped += 1
            continue
        place.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(file, place)
        pushed += 1
    return pushed, skipped


def shell(root: Path, command: str) -> int:
    shell_command = shlex.split(os.environ.get("STANDIN_ADB_SHELL") or ("mksh" if shutil.which("mksh") else "sh"))
    system_bin = root / "system" / "bin"
    system_bin.mkdir(parents=True, exist_ok=True)
    sh = system_bin / "sh"
    if not sh.is_symlink():
        sh.symlink_to(shutil.which(shell_command[0]))
    (root / DEVICE_TMP.lstrip("/")).mkdir(parents=True, exist_ok=True)
    environment = {**os.environ, "PATH": f"{system_bin}{os.pathsep}{os.environ['PATH']}"}
    mapped = command.replace(DEVICE_TMP, str(root / DEVICE_TMP.lstrip("/")))
    prefix = shlex.split(os.environ.get("STANDIN_ADB_EXEC", ""))
    return subprocess.run([*prefix, *shell_command, "-c", mapped], env=environment, cwd=root).returncode


def main(argv: list[str]) -> int:
    root = Path(os.environ["STANDIN_ADB_ROOT"])
    root.mkdir(parents=True, exist_ok=True)
    if os.environ.get("STANDIN_ADB_LOG"):
        with open(os.environ["STANDIN_ADB_LOG"], "a") as log:
            log.write(json.dumps(argv) + "\n")
    calls = root / ".standin-adb-calls"
    count = int(calls.read_text()) + 1 if calls.exists() else 1
    calls.write_text(str(count))
    dropped = os.environ.get("STANDIN_ADB_FAIL_AFTER") and count > int(os.environ["STANDIN_ADB_FAIL_AFTER"])
    listed = os.environ.get("STANDIN_ADB_DEVICES", "emulator-5554=device")
    devices = dict(entry.split("=", 1) for entry in listed.split(",") if entry)
    if argv[:1] == ["devices"]:
        print("List of devices attached")
        for serial, state in devices.items():
            print(f"{serial}\t{state}")
        print()
        return 0
    serial = argv[1] if argv[:1] == ["-s"] else None
    argv = argv[2:] if serial else argv
    if serial is None:
        if not devices:
            fail("no devices/emulators found")
        if len(devices) > 1:
            fail("more than one device/emulator")
        serial = next(iter(devices))
    if serial not in devices or dropped and argv[0] != "pull":
        fail(f"device '{serial}' not found")
    if argv[0] == "get-state":
        print(devices[serial])
        return 0
    if devices[serial] != "device":
        fail(f"device {devices[serial]}")
    if argv[0] == "push":
        sources = [Path(p) for p in argv[1:-1] if p != "--sync"]
        pushed = skipped = 0
        for source in sources:
            counts = copy(source, on_host(root, argv[-1]), "--sync" in argv)
            pushed, skipped = pushed + counts[0], skipped + counts[1]
        print(f"{argv[-1]}: {pushed} files pushed, {skipped} skipped.")
        return 0
    if argv[0] == "pull":
        source = on_host(root, argv[1])
        if not source.exists():
            fail(f"remote object '{argv[1]}' does not exist")
        half = len(files_under(source)) // 2 if dropped else None
        pulled, _ = copy(source, Path(argv[2]), False, half)
        if dropped:
            fail(f"device '{serial}' not found")
        print(f"{argv[1]}: {pulled} files pulled, 0 skipped.")
        return 0
    if argv[0] == "shell":
        return shell(root, " ".join(argv[1:]))
    fail(f"unknown command {argv[0]}")
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
