"""``layoutbench runtime build`` and ``layoutbench runtime``.

The build itself runs only where an ExecuTorch source tree is found: ``$LAYOUTBENCH_ET_SOURCE``,
else :data:`DEFAULT_SOURCE` (DEVELOPERS.md says how one is put there); elsewhere it is
skipped, naming both places. It reuses the build directory the cache keeps, so on a machine
that built once it is an incremental ninja run (seconds), not a 6-minute compile. The
rest always runs: the report, the cache key, the errors.
"""

import importlib.metadata
import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness import cli
from harness.targets.vulkan.local import runners, runtime_build, runtime_source

DEFAULT_SOURCE = Path.home() / ".cache" / "layoutbench-src" / "executorch"
STAND_IN = Path(__file__).parent / "helpers" / "fake_executor_runner.py"
STAND_IN_PROJECT = Path(__file__).parent / "data" / "runtime_stand_in"
AARCH64_TOOLCHAIN = Path(__file__).parents[1] / "docs" / "toolchains" / "aarch64-linux-gnu.cmake"
ELF_MACHINE_AARCH64 = 183  # e_machine, the ELF header's bytes 18-19


@pytest.fixture
def empty_cache(tmp_path, monkeypatch):
    """A cache of its own, and no runner from the environment or PATH."""
    monkeypatch.setenv("LAYOUTBENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(runners.RUNNER_ENV, raising=False)
    path = [d for d in os.environ["PATH"].split(os.pathsep) if not (Path(d) / runners.RUNNER_NAME).exists()]
    monkeypatch.setenv("PATH", os.pathsep.join(path))
    return tmp_path / "cache"


def _built(key: str, flags: list[str]) -> Path:
    """A runner as runtime build leaves it (the stand-in as the binary), with its build.json."""
    build = runners.runtime_dir() / key
    build.mkdir(mode=0o700)  # as runtime build makes it: closed to others, whatever the umask
    binary = build / runners.RUNNER_NAME
    binary.write_text(f"#!/bin/sh\nexec {sys.executable} {STAND_IN} \"$@\"\n")
    binary.chmod(0o755)
    (build / "build.json").write_text(json.dumps({
        "source": "/src/executorch", "source_identity": "abc", "source_described": "git commit abc",
        "flags": flags, "glslc": "glslc", "seconds": 30.0, "first_build_seconds": 360.0,
        "built_at": "2026-11-24T09:00:00Z"}))
    return binary


def test_report_without_a_runtime_says_how_to_get_one(empty_cache, capsys):
    if "VulkanBackend" in runners.pybindings_backends():
        pytest.skip("this machine's pybindings have VulkanBackend")
    assert cli.main(["runtime"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("no runtime: no ExecuTorch runtime with the Vulkan backend")
    assert "layoutbench runtime build --source DIR" in out


def test_report_names_the_newest_build_its_rule_digest_and_flags(empty_cache, capsys):
    older = _built("aaaaaaaaaaaa-111111111111", ["-DOLD=ON"])
    newer = _built("bbbbbbbbbbbb-222222222222", ["-DCMAKE_BUILD_TYPE=Release", "-DEXECUTORCH_BUILD_VULKAN=ON"])
    os.utime(older, (1, 1))
    assert runners.find_runtime(None).path == newer
    assert cli.main(["runtime"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"runtime: {newer}"
    assert lines[1] == f"found as: {runners.BUILT}"
    assert lines[2] == f"sha256: {runtime_source.file_digest(newer)}"
    assert lines[3] == ("built: 2026-11-24T09:00:00Z from /src/executorch (git commit abc) in 0.5 min "
                        "(the first build: 6.0 min)")
    assert lines[4] == "flags: -DCMAKE_BUILD_TYPE=Release -DEXECUTORCH_BUILD_VULKAN=ON"


def test_the_earlier_rules_win_over_a_build(empty_cache, tmp_path, monkeypatch, capsys):
    built = _built("cccccccccccc-333333333333", [])
    own = runners.cached_runner()
    own.write_bytes(built.read_bytes())
    own.chmod(0o755)
    assert runners.locate_runtime(None)[1] == runners.IN_CACHE
    monkeypatch.setenv(runners.RUNNER_ENV, str(built))
    assert runners.locate_runtime(None, str(built))[1] == runners.BY_ENVIRONMENT
    assert runners.locate_runtime(str(own), str(built))[1] == runners.BY_FLAG
    assert cli.main(["runtime", "--et-runner", str(own)]) == 0
    out = capsys.readouterr().out
    assert f"runtime: {own}\nfound as: --et-runner" in out
    assert "not by layoutbench runtime build" in out


def test_without_source_or_internet_one_line_says_pass_source(empty_cache, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(runtime_source, "EXECUTORCH_GIT_URL", str(tmp_path / "unreachable.git"))
    assert cli.main(["runtime", "build"]) == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith("layoutbench: error: could not clone ExecuTorch v")
    assert error.endswith("without internet, pass --source DIR, an ExecuTorch source tree with its submodules")
    version = importlib.metadata.version("executorch")
    assert not (runners.runtime_dir() / "source" / f"v{version}" / "executorch").exists()  # no half clone left


def test_a_source_that_is_not_executorch_is_one_line(empty_cache, tmp_path, capsys):
    assert cli.main(["runtime", "build", "--source", str(tmp_path)]) == 2
    assert "is not an ExecuTorch source tree" in capsys.readouterr().err
    (tmp_path / "CMakeLists.txt").write_text("")
    (tmp_path / "backends" / "vulkan").mkdir(parents=True)
    assert cli.main(["runtime", "build", "--source", str(tmp_path)]) == 2
    assert "lacks the submodules backends/vulkan/third-party/Vulkan-Headers," in capsys.readouterr().err


def _git(tree: Path, *arguments: str) -> None:
    subprocess.run(["git", "-C", str(tree), "-c", "user.name=t", "-c", "user.email=t@t", *arguments],
                   check=True, capture_output=True)


def test_cache_key_follows_commit_changes_and_flags(empty_cache, tmp_path):
    tree = tmp_path / "executorch"
    (tree / "runtime").mkdir(parents=True)
    (tree / "runtime" / "a.cpp").write_text("int a;")
    _git(tree, "init", "-q")
    _git(tree, "add", ".")
    _git(tree, "commit", "-qm", "one")
    first = runtime_source.source_tree(tree)
    assert first.described == f"git commit {first.identity}" and len(first.identity) == 40
    flags = runtime_build.BUILD_FLAGS
    key = runtime_build.build_dir(first, flags)
    assert key.parent == runners.runtime_dir() and key.name.startswith(first.identity[:12])
    assert runtime_build.build_dir(first, (*flags, "-DEXECUTORCH_ENABLE_LOGGING=ON")) != key
    (tree / "runtime" / "a.cpp").write_text("int b;")
    edited = runtime_source.source_tree(tree)
    assert edited.identity.startswith(first.identity + "+") and runtime_build.build_dir(edited, flags) != key
    _git(tree, "commit", "-qam", "two")
    assert runtime_source.source_tree(tree).identity not in (first.identity, edited.identity)


def test_a_tree_without_git_is_keyed_by_its_files_not_by_build_outputs(tmp_path):
    tree = tmp_path / "executorch"
    (tree / "third-party" / "flatcc" / "src").mkdir(parents=True)
    (tree / "third-party" / "flatcc" / "src" / "c.c").write_text("int c;")
    first = runtime_source.source_tree(tree)
    assert first.identity.startswith("files-") and "not a git checkout" in first.described
    (tree / "third-party" / "flatcc" / "lib").mkdir()
    (tree / "third-party" / "flatcc" / "lib" / "libflatccrt.a").write_text("built")
    (tree / "__pycache__").mkdir()
    (tree / "__pycache__" / "gen.pyc").write_text("built")
    assert runtime_source.source_tree(tree).identity == first.identity
    (tree / "third-party" / "flatcc" / "src" / "c.c").write_text("int d;")
    assert runtime_source.source_tree(tree).identity != first.identity


def test_a_tree_named_otherwise_or_without_json_is_staged_as_executorch(tmp_path):
    source = tmp_path / "et-main"
    (source / "third-party" / "gflags").mkdir(parents=True)
    (source / "third-party" / "json").mkdir()
    (source / "CMakeLists.txt").write_text("")
    staged = runtime_source.staged_source(source, tmp_path / "build")
    assert staged.name == "executorch" and (staged / "CMakeLists.txt").resolve() == source / "CMakeLists.txt"
    assert (staged / "third-party" / "gflags").resolve() == source / "third-party" / "gflags"
    assert "add_library(nlohmann_json INTERFACE)" in (staged / "third-party" / "json" / "CMakeLists.txt").read_text()
    assert not any((source / "third-party" / "json").iterdir())  # the user's tree is left as it was
    complete = tmp_path / "executorch"
    (complete / "third-party" / "json").mkdir(parents=True)
    (complete / "third-party" / "json" / "CMakeLists.txt").write_text("project(json)")
    assert runtime_source.staged_source(complete, tmp_path / "build2") == complete


@pytest.fixture
def stand_in_source(tmp_path, monkeypatch) -> Path:
    """tests/data/runtime_stand_in as an ExecuTorch tree (with the directories check_source
    looks for), built with a glslc that writes a 4-byte "shader"."""
    for tool in ("cmake", "ninja", "aarch64-linux-gnu-g++"):
        if not shutil.which(tool):
            pytest.skip(f"no {tool} here: make system-deps installs it")
    source = tmp_path / "executorch"
    shutil.copytree(STAND_IN_PROJECT, source)
    for name in ("backends/vulkan", *runtime_source.RUNNER_SUBMODULES, runtime_source.JSON_SUBMODULE):
        (source / name).mkdir(parents=True, exist_ok=True)
        (source / name / "CMakeLists.txt").write_text("# stand-in\n")
    fake_glslc = tmp_path / "glslc"
    fake_glslc.write_text('#!/bin/sh\nwhile [ $# -gt 0 ]; do [ "$1" = -o ] && printf spv! > "$2"; shift; done\n')
    fake_glslc.chmod(0o755)
    monkeypatch.setattr(runtime_build, "glslc", lambda: str(fake_glslc))
    return source


def _elf_machine(binary: Path) -> int:
    header = binary.read_bytes()[:20]
    assert header[:4] == b"\x7fELF", f"{binary} is not an ELF file"
    return int.from_bytes(header[18:20], "little")


def test_a_toolchain_builds_for_the_device_cached_apart_and_never_picked_here(empty_cache, stand_in_source, capsys):
    """The stand-in project cross-built with Debian's aarch64 compiler: an arm64 binary, its
    host tools run here; the host's build of the same tree has another key, and is what the
    harness's runs here pick; `runtime` lists both with what each is for."""
    build = ["runtime", "build", "--source", str(stand_in_source), "--jobs", "2"]
    assert cli.main([*build, "--toolchain", str(AARCH64_TOOLCHAIN)]) == 0
    cross = Path(capsys.readouterr().out.strip())
    assert _elf_machine(cross) == ELF_MACHINE_AARCH64
    if shutil.which("file"):
        assert "ARM aarch64" in subprocess.run(["file", str(cross)], capture_output=True, text=True).stdout
    record = json.loads((cross.parent / "build.json").read_text())
    assert record["built_for"] == "Linux aarch64" and record["toolchain"] == str(AARCH64_TOOLCHAIN.resolve())
    assert f"-DCMAKE_TOOLCHAIN_FILE={AARCH64_TOOLCHAIN.resolve()}" in record["flags"]
    cache = (cross.parent / "build" / "CMakeCache.txt").read_text()
    assert f"FLATCC_INSTALL_LIB:UNINITIALIZED=lib/{cross.parent.name}\n" in cache  # not where the host's build puts it

    assert cli.main(build) == 0
    host = Path(capsys.readouterr().out.strip())
    assert host.parent != cross.parent
    assert json.loads((host.parent / "build.json").read_text())["built_for"] == f"Linux {platform.machine()} (this host)"
    assert subprocess.run([host], capture_output=True, text=True).stdout == "4\n"  # glslc's and Python's output
    os.utime(cross)  # the newest build: still not the host's
    assert runners.find_runtime(None).path == host
    assert runners.newest_built_runner(AARCH64_TOOLCHAIN) == cross
    assert cli.main(["runtime"]) == 0
    out = capsys.readouterr().out
    assert f"runtime: {host}\n" in out
    assert f"builds (layoutbench runtime build, newest first):\n  {cross}: for Linux aarch64\n  {host}: for Linux " \
           f"{platform.machine()} (this host)" in out


def test_the_toolchain_files_content_is_part_of_the_key(empty_cache, tmp_path):
    toolchain = tmp_path / "board.cmake"
    toolchain.write_text("set(CMAKE_SYSTEM_NAME Linux)\n")
    tree = runtime_source.SourceTree(tmp_path, "abc", "abc", "git commit abc")
    flags = (*runtime_build.BUILD_FLAGS, f"-DCMAKE_TOOLCHAIN_FILE={toolchain}")
    first = runtime_build.build_dir(tree, flags, toolchain)
    assert first != runtime_build.build_dir(tree, runtime_build.BUILD_FLAGS)
    toolchain.write_text("set(CMAKE_SYSTEM_NAME Android)\n")
    assert runtime_build.build_dir(tree, flags, toolchain) != first


def test_a_toolchain_that_is_not_a_file_is_one_line(empty_cache, tmp_path, capsys):
    assert cli.main(["runtime", "build", "--toolchain", str(tmp_path / "none.cmake")]) == 2
    assert capsys.readouterr().err.strip().endswith("is not a file; pass a CMake toolchain file (the Android NDK's is "
                                                    "build/cmake/android.toolchain.cmake)")
    assert cli.main(["runtime", "--toolchain", str(AARCH64_TOOLCHAIN)]) == 2
    assert capsys.readouterr().err.strip().endswith("--source, --toolchain, --cmake-arg, --rebuild and --jobs go with "
                                                    "runtime build")


@pytest.fixture(scope="module")
def executorch_source() -> Path:
    path = Path(os.environ.get("LAYOUTBENCH_ET_SOURCE") or DEFAULT_SOURCE)
    if not (path / "backends" / "vulkan").is_dir():
        pytest.skip(f"no ExecuTorch source tree: looked at $LAYOUTBENCH_ET_SOURCE "
                    f"({os.environ.get('LAYOUTBENCH_ET_SOURCE') or 'unset'}) and {DEFAULT_SOURCE}; "
                    "DEVELOPERS.md says how to get one")
    return path


def test_built_runner_runs_a_vulkan_program_with_no_flag(executorch_source, tmp_path, monkeypatch, capsys):
    """Build (incremental where the cache has the build directory), then build again: reused,
    in one line; then vulkan-run finds the runner by itself and the program runs."""
    monkeypatch.delenv(runners.RUNNER_ENV, raising=False)
    path = [d for d in os.environ["PATH"].split(os.pathsep) if not (Path(d) / runners.RUNNER_NAME).exists()]
    monkeypatch.setenv("PATH", os.pathsep.join(path))
    if os.access(runners.cached_runner(), os.X_OK):
        pytest.skip(f"{runners.cached_runner()} (put there by hand) would be used before any build")
    assert cli.main(["runtime", "build", "--source", str(executorch_source), "--rebuild"]) == 0
    binary = Path(capsys.readouterr().out.strip())
    assert binary.name == runners.RUNNER_NAME and json.loads((binary.parent / "build.json").read_text())["flags"][
        :len(runtime_build.BUILD_FLAGS)] == list(runtime_build.BUILD_FLAGS)
    assert cli.main(["runtime", "build", "--source", str(executorch_source)]) == 0
    assert capsys.readouterr().err.strip().splitlines() == [
        f"layoutbench runtime build: reusing {binary} (built from {executorch_source.resolve()}, "
        f"{runtime_source.source_tree(executorch_source).described}; same flags); --rebuild compiles again"]
    assert runners.locate_runtime(None)[1] == runners.BUILT
    # In this process, whose PATH was just changed: a fork server started earlier keeps the PATH it had.
    code = cli.main(["run", "--models", "synthetic_small", "--strategies", "bfs-downstream", "--target",
                     "vulkan-run", "--workers", "0", "--out", str(tmp_path), "--iterations", "2", "--format", "json"])
    [record] = json.loads(capsys.readouterr().out)
    assert code == 0 and record["status"] == "ok", record["reason"]
    assert record["runtime"] == runners.RUNNER_NAME and record["gpu_dispatch_ms"] > 0
    assert (tmp_path / "programs" / "synthetic_small" / "bfs-downstream.etdump").stat().st_size > 0


def _repository(path: Path, files: dict[str, str]) -> str:
    """A git repository at ``path`` with ``files`` committed; its commit."""
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    _git(path, "init", "-q")
    _git(path, "add", ".")
    _git(path, "commit", "-qm", "files")
    return subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()


def test_without_source_the_installed_tag_is_cloned_with_the_runners_submodules(empty_cache, tmp_path, monkeypatch):
    """A stand-in upstream (local repositories): the tag of the installed executorch, the
    runner's submodules at their pins; json's pin cannot be had (as in this machine's
    snapshot), which is no error: the build stages a stand-in for it."""
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")  # git refuses file:// submodules unless told
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "protocol.file.allow")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", "always")
    upstream = tmp_path / "upstream"
    modules = []
    for index, name in enumerate((*runtime_source.RUNNER_SUBMODULES, runtime_source.JSON_SUBMODULE)):
        repository = tmp_path / "submodules" / str(index)
        commit = _repository(repository, {"include/header.h": name})
        url = f"file://{repository}" if name != runtime_source.JSON_SUBMODULE else f"file://{tmp_path}/gone"
        modules.append((name, commit, url))
    _repository(upstream, {"CMakeLists.txt": "", "backends/vulkan/CMakeLists.txt": "", ".gitmodules": "".join(
        f'[submodule "{name}"]\n\tpath = {name}\n\turl = {url}\n' for name, _, url in modules)})
    for name, commit, _ in modules:
        _git(upstream, "update-index", "--add", "--cacheinfo", f"160000,{commit},{name}")
    _git(upstream, "commit", "-qm", "submodules")
    tag = f"v{importlib.metadata.version('executorch').split('+')[0]}"
    _git(upstream, "tag", tag)
    monkeypatch.setattr(runtime_source, "EXECUTORCH_GIT_URL", f"file://{upstream}")

    source = runtime_source.cloned_source()
    assert source == runners.runtime_dir() / "source" / tag / "executorch"
    runtime_source.check_source(source)
    assert (source / runtime_source.RUNNER_SUBMODULES[0] / "include" / "header.h").read_text() == \
        runtime_source.RUNNER_SUBMODULES[0]
    assert not any((source / runtime_source.JSON_SUBMODULE).iterdir())
    clean = runtime_source.source_tree(source)
    assert clean.described.startswith("git commit ")
    header = source / runtime_source.RUNNER_SUBMODULES[0] / "include" / "header.h"
    header.with_name("built.o").write_text("a build's output")
    assert runtime_source.source_tree(source) == clean
    header.write_text("edited")
    assert runtime_source.source_tree(source).identity.startswith(clean.identity + "+")
    upstream.rename(tmp_path / "upstream-gone")
    assert runtime_source.cloned_source() == source  # kept: no second clone
