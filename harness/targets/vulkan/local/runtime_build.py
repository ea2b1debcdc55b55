"""``layoutbench runtime build``: ExecuTorch's ``executor_runner`` with the Vulkan backend,
built from an ExecuTorch source tree into the cache; ``layoutbench runtime``: which runtime
the harness would use, and why.

A build is kept in ``CACHE/runtime/<source>-<flags>/``: the binary, ``build.json`` (what it
was built from, with which flags, how long it took) and the CMake build directory, so that
building the same source again is incremental. ``<source>`` is the tree's git commit (plus a
digest of uncommitted changes to tracked files), else a digest of its files; ``<flags>`` a
digest of the CMake flags (and of the toolchain file's content, for a cross build).
``find_runtime`` finds the newest build for this host with no flag.

``--toolchain FILE`` (a CMake toolchain file: the Android NDK's, a cross compiler's) builds
for another device; ``build.json`` says what CMake built for. What runs during the build runs
here: glslc, ET-VK's shader generator, flatc and flatcc. flatcc writes its libraries into the
source tree, each build's into a directory of their own, or an incremental host build would
link a cross build's.

The traps met building it by hand, handled here:

- ET-VK's shaders use ``GL_EXT_integer_dot_product``, which older glslc (Debian 12's shaderc
  2023.2) rejects: a glslc that fails a probe shader is replaced by Debian trixie's, run
  through the trixie runtime :mod:`harness.targets.debian_trixie` fetches.
- ExecuTorch's headers are included as ``<executorch/...>`` from the tree's parent: a tree not
  in a directory named ``executorch`` is reached through one of that name beside the build.
- A tree whose ``third-party/json`` is empty (no nlohmann/json's pinned commit) cannot be
  configured, though the runner never uses it: the build sees a stand-in defining only its target.
"""

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness.cache import DiskCache
from harness.errors import RuntimeBuildError, UsageError
from harness.targets import debian_trixie
from harness.targets.base import HostSettings
from harness.targets.vulkan.local.runners import (
    BUILD_RECORD, NO_RUNTIME_REASON, RUNNER_NAME, ExecutorRunner, build_record, built_runners, locate_runtime,
    runtime_dir)
from harness.targets.vulkan.local.runtime_source import (
    PREFIX, SourceTree, check_source, cloned_source, digest, file_digest, say, source_tree, staged_source)

BUILD_FLAGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DEXECUTORCH_BUILD_VULKAN=ON",
    "-DEXECUTORCH_BUILD_EXECUTOR_RUNNER=ON",
    "-DEXECUTORCH_BUILD_DEVTOOLS=ON",
    "-DEXECUTORCH_ENABLE_EVENT_TRACER=ON",
    # The runner needs none of them; each is minutes of compiling on a small machine.
    "-DEXECUTORCH_BUILD_XNNPACK=OFF",
    "-DEXECUTORCH_BUILD_PTHREADPOOL=OFF",
    "-DEXECUTORCH_BUILD_CPUINFO=OFF",
)
GLSLC_PROBE = """#version 450
#extension GL_EXT_integer_dot_product : require
layout(local_size_x = 1) in;
void main() {}
"""
NINJA_STEP = re.compile(r"^\[(\d+)/(\d+)\]")
BUILDS = DiskCache("runtime")  # only its lock: a second build of the same key waits for the first


def build_dir(source: SourceTree, flags: tuple[str, ...], toolchain: Path | None = None) -> Path:
    """``CACHE/runtime/<source>-<flags>``: the binary, build.json and the CMake build directory;
    ``toolchain``'s content is part of ``<flags>`` (the file may change under the same path)."""
    toolchain_content = (file_digest(toolchain),) if toolchain else ()
    return runtime_dir() / f"{source.short}-{digest((*flags, *toolchain_content))[:12]}"


def _built_for(cmake_build: Path, toolchain: Path | None) -> str:
    """What CMake built for, as its configure step found it (CMakeSystem.cmake): "Linux
    aarch64", "Android 26 aarch64" (the NDK's system version is the API level); this host's
    kernel version is left out."""
    system_file = max(cmake_build.glob("CMakeFiles/*/CMakeSystem.cmake"), key=lambda path: path.stat().st_mtime)
    system = dict(re.findall(r'^set\(CMAKE_SYSTEM_(NAME|VERSION|PROCESSOR) "([^"]*)"\)', system_file.read_text(), re.M))
    parts = (system.get("NAME"), system.get("VERSION") if toolchain else None, system.get("PROCESSOR"))
    return " ".join(part for part in parts if part) + ("" if toolchain else " (this host)")


def _compiles_shaders(glslc: str) -> bool:
    with tempfile.TemporaryDirectory() as scratch:
        probe = Path(scratch) / "probe.comp"
        probe.write_text(GLSLC_PROBE)
        try:
            done = subprocess.run([glslc, str(probe), "-o", str(probe.with_suffix(".spv"))],
                                  capture_output=True, timeout=60)
        except OSError:
            return False
    return done.returncode == 0


def glslc() -> str:
    """A glslc that compiles ET-VK's shaders: the one on PATH where it can, else Debian
    trixie's (fetched once), started through the trixie runtime by a wrapper script."""
    system = shutil.which("glslc")
    if system and _compiles_shaders(system):
        return system
    binary = debian_trixie.root() / "usr" / "bin" / "glslc"
    if not (binary.exists() and debian_trixie.loader().exists()):
        say("fetching Debian trixie's glslc (the one here cannot compile ET-VK's shaders)" if system
             else "fetching Debian trixie's glslc (none on PATH)")
        debian_trixie.fetch(("glslc", "libshaderc1"), "the Vulkan shaders' compiler (glslc)", RuntimeBuildError)
    wrapper = debian_trixie.host_dir() / "bin" / "glslc"
    wrapper.parent.mkdir(parents=True, exist_ok=True)
    library_path = [str(debian_trixie.library_dir()), *debian_trixie.SYSTEM_LIBRARIES]
    wrapper.write_text(f"#!/bin/sh\n# Written by {__name__}.\n{debian_trixie.start_command(binary, library_path)}\n")
    wrapper.chmod(0o755)
    if not _compiles_shaders(str(wrapper)):
        raise RuntimeBuildError(f"Debian trixie's glslc ({wrapper}) does not compile a probe shader with "
                                "GL_EXT_integer_dot_product; put a glslc from shaderc >= 2024 on PATH")
    return str(wrapper)


@contextlib.contextmanager
def _progress():
    """A ``step(done, total)`` showing ninja's [N/M] as a bar on a terminal; elsewhere (a log,
    CI) a line each tenth."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    lines, started, task, tenth_said = not console.is_terminal, time.monotonic(), None, -1
    with Progress(TextColumn(f"{PREFIX}: compiling"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, disable=lines) as bar:
        def step(done: int, total: int) -> None:
            nonlocal task, tenth_said
            if task is None:
                task = bar.add_task("compiling", total=total)
            bar.update(task, completed=done, total=total)
            if lines and done * 10 // total > tenth_said:
                tenth_said = done * 10 // total
                say(f"[{done}/{total}] {time.monotonic() - started:.0f} s")

        yield step


def _build_error(what: str, log: Path, marker: str) -> RuntimeBuildError:
    """``what`` failed: the first line of ``log`` that ``marker`` finds, and where the whole log is."""
    found = (line.strip()[:300] for line in log.read_text(errors="replace").splitlines() if re.search(marker, line))
    return RuntimeBuildError(f"{what}: {next(found, 'no error line found')}; the whole log is {log}")


def _configure(source: Path, cmake_build: Path, flags: tuple[str, ...], glslc_path: str) -> None:
    log = cmake_build.parent / "configure.log"
    say(f"configuring with CMake (log: {log})")
    command = ["cmake", "-G", "Ninja", "-S", str(source), "-B", str(cmake_build), *flags,
               f"-DGLSLC_PATH={glslc_path}", f"-DPYTHON_EXECUTABLE={sys.executable}",
               f"-DFLATCC_INSTALL_LIB=lib/{cmake_build.parent.name}"]
    with log.open("w") as out:
        done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, timeout=1800)
    if done.returncode != 0:
        raise _build_error("CMake could not configure ExecuTorch", log, r"CMake Error|does not contain|not found")


def _compile(cmake_build: Path, jobs: int) -> None:
    log = cmake_build.parent / "build.log"
    command = ["ninja", "-C", str(cmake_build), f"-j{jobs}", RUNNER_NAME]
    with log.open("w") as out, _progress() as step:
        ninja = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for line in ninja.stdout:
            out.write(line)
            counted = NINJA_STEP.match(line)
            if counted:
                step(int(counted.group(1)), int(counted.group(2)))
        ninja.wait()
    if ninja.returncode != 0:
        raise _build_error(f"{RUNNER_NAME} did not compile", log, r"error:|FAILED:")


def build(source: str | None, extra_flags: list[str], rebuild: bool = False, jobs: int | None = None,
          host: HostSettings = HostSettings(), toolchain: str | None = None) -> Path:
    """Build (or reuse) the runner for ``source`` (None: a clone of the installed executorch's
    tag) with :data:`BUILD_FLAGS` and ``extra_flags``, for this host or, with ``toolchain`` (a
    CMake toolchain file), for another device; the path of the binary. ``host``: where the
    user's environment names a runner, which would come before it."""
    if source is not None and not Path(source).is_dir():
        raise UsageError(f"--source {source} is not a directory; pass the top of an ExecuTorch source tree")
    if toolchain is not None and not Path(toolchain).is_file():
        raise UsageError(f"--toolchain {toolchain} is not a file; pass a CMake toolchain file "
                         "(the Android NDK's is build/cmake/android.toolchain.cmake)")
    toolchain_file = Path(toolchain).resolve() if toolchain else None
    path = Path(source).resolve() if source else cloned_source()
    check_source(path)
    tree = source_tree(path)
    toolchain_flags = [f"-DCMAKE_TOOLCHAIN_FILE={toolchain_file}"] if toolchain_file else []
    flags = (*BUILD_FLAGS, *toolchain_flags, *extra_flags)
    build = build_dir(tree, flags, toolchain_file)
    binary = build / RUNNER_NAME
    with BUILDS.lock(build.name):
        if binary.exists() and not rebuild:
            binary.touch()  # the newest again: find_runtime uses what was asked for last
            say(f"reusing {binary} (built from {tree.path}, {tree.described}; same flags); --rebuild compiles again")
            return binary
        missing = [tool for tool in ("cmake", "ninja") if not shutil.which(tool)]
        if missing:
            raise UsageError(f"building the runtime needs {' and '.join(missing)}: install them "
                             "(Debian: apt-get install cmake ninja-build)")
        glslc_path = glslc()
        cmake_build = build / "build"
        build.mkdir(mode=0o700, exist_ok=True)  # closed to others: what it holds runs (see layoutkit.files)
        cmake_build.mkdir(exist_ok=True)
        started = time.monotonic()
        if not (cmake_build / "build.ninja").exists():
            _configure(staged_source(tree.path, build), cmake_build, flags, glslc_path)
        _compile(cmake_build, jobs or os.cpu_count() or 1)
        seconds = time.monotonic() - started
        record = build / BUILD_RECORD
        first_seconds = json.loads(record.read_text())["first_build_seconds"] if record.exists() else seconds
        record.write_text(json.dumps({
            "source": str(tree.path), "source_identity": tree.identity, "source_described": tree.described,
            "flags": list(flags), "glslc": glslc_path, "toolchain": str(toolchain_file) if toolchain_file else None,
            "built_for": _built_for(cmake_build, toolchain_file),
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "seconds": round(seconds, 1), "first_build_seconds": round(first_seconds, 1)}, indent=1) + "\n")
        # Copied, not linked: the build directory may be rebuilt while a run uses the binary.
        temporary = build / f".{RUNNER_NAME}.tmp"
        shutil.copyfile(cmake_build / RUNNER_NAME, temporary)
        temporary.chmod(0o755)
        os.replace(temporary, binary)
    say(f"built {binary} in {seconds / 60:.1f} min ({binary.stat().st_size / 1e6:.1f} MB); "
        f"{_who_finds(binary, host)}")
    return binary


def _who_finds(binary: Path, host: HostSettings) -> str:
    record = build_record(binary)
    if record["toolchain"]:
        return f"for {record['built_for']}: copy it to that device; runs on this host never pick it"
    runtime, rule = locate_runtime(None, host.et_runner)
    if isinstance(runtime, ExecutorRunner) and runtime.path == binary:
        return "vulkan-run, profile and asv find it with no flag"
    return f"but {runtime.path} ({rule}) comes first: pass --et-runner {binary}, or remove that one"


def report(et_runner: str | None = None, host: HostSettings = HostSettings()) -> tuple[str, bool]:
    """Which runtime the harness would use and why (``et_runner``: the flag's; ``host``: the
    environment's), then every build in the cache with what it is for: (lines for people,
    whether a runtime was found)."""
    runtime, rule = locate_runtime(et_runner, host.et_runner)
    lines = _runtime_lines(runtime, rule)
    builds = built_runners()
    if builds:
        lines += ["builds (layoutbench runtime build, newest first):",
                  *(f"  {path}: for {record.get('built_for', 'this host')}" for path, record in builds)]
    return "\n".join(lines), runtime is not None


def _runtime_lines(runtime, rule: str | None) -> list[str]:
    if runtime is None:
        return [f"no runtime: {NO_RUNTIME_REASON}"]
    if not isinstance(runtime, ExecutorRunner):
        return [f"runtime: {runtime.name}, found as {rule}"]
    lines = [f"runtime: {runtime.path}", f"found as: {rule}",
             f"sha256: {file_digest(runtime.path)}"]
    info = build_record(runtime.path)
    if info:
        lines += [f"built: {info['built_at']} from {info['source']} ({info['source_described']}) in "
                  f"{info['seconds'] / 60:.1f} min (the first build: {info['first_build_seconds'] / 60:.1f} min)",
                  f"flags: {' '.join(info['flags'])}"]
    else:
        lines.append("built: not by layoutbench runtime build (its flags and source are not known here)")
    return lines
