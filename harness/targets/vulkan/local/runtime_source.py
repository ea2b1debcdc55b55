"""The ExecuTorch source tree ``layoutbench runtime build`` builds from: what identifies its
content (:func:`source_tree`), a clone of the installed executorch's tag with the runner's
submodules (:func:`cloned_source`), and the tree as the build sees it (:func:`staged_source`).
"""

import hashlib
import importlib.metadata
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from harness.errors import UsageError
from harness.targets.vulkan.local.runners import runtime_dir
from layoutkit.errors import last_line

PREFIX = "layoutbench runtime build"
EXECUTORCH_GIT_URL = "https://github.com/pytorch/executorch.git"
# git in the environment it inherits, where a clone that needs credentials fails instead of
# asking for them on the terminal (a build without internet must say so, not wait).
GIT_WITHOUT_PROMPTS = ("env", "GIT_TERMINAL_PROMPT=0", "git")
# The submodules the runner's build reads, but for third-party/json: a stand-in replaces it if it cannot be had.
RUNNER_SUBMODULES = (
    "backends/vulkan/third-party/Vulkan-Headers",
    "backends/vulkan/third-party/VulkanMemoryAllocator",
    "backends/vulkan/third-party/volk",
    "backends/xnnpack/third-party/FXdiv",
    "third-party/flatbuffers",
    "third-party/flatcc",
    "third-party/gflags",
)
JSON_SUBMODULE = "third-party/json"
JSON_STAND_IN = """# Written by layoutbench runtime build: the tree's nlohmann/json is missing, and the
# runner does not use it; only its target is defined, so that third-party/ configures.
add_library(nlohmann_json INTERFACE)
add_library(nlohmann_json::nlohmann_json ALIAS nlohmann_json)
"""
# What a build writes into the source tree itself (flatcc's library and tools, Python's
# bytecode of the code generators): left out of a tree's digest, or building would change it.
BUILD_OUTPUTS_IN_SOURCE = ("third-party/flatcc/lib", "third-party/flatcc/bin")
BYTECODE_DIRECTORY = "__pycache__"


@dataclass(frozen=True)
class SourceTree:
    """An ExecuTorch source tree and what identifies its content."""

    path: Path
    identity: str  # git commit (+ digest of uncommitted changes), or "files-<digest>"
    short: str  # the same, shortened for the cache key
    described: str  # for people: "git commit X" or "digest of its files X"


def say(text: str) -> None:
    print(f"{PREFIX}: {text}", file=sys.stderr, flush=True)


def digest(parts) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part if isinstance(part, bytes) else str(part).encode())
        digest.update(b"\0")
    return digest.hexdigest()


def file_digest(path: Path) -> str:
    with path.open("rb") as binary:
        return hashlib.file_digest(binary, "sha256").hexdigest()


def _git(source: Path, *arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(source), *arguments], capture_output=True, timeout=300)


def _git_fetch(*arguments: str) -> str | None:
    """Run git to fetch over the network: None where it worked, else the last line it said."""
    done = subprocess.run([*GIT_WITHOUT_PROMPTS, *arguments], capture_output=True, text=True, timeout=3600)
    return last_line(done.stderr) if done.returncode else None


def _files_digest(source: Path) -> str:
    """A digest of every file's path and content (links: their target), build outputs aside."""
    parts = []
    for directory, subdirectories, files in os.walk(source):
        relative = Path(directory).relative_to(source)
        subdirectories[:] = sorted(
            name for name in subdirectories
            if name not in (".git", BYTECODE_DIRECTORY) and str(relative / name) not in BUILD_OUTPUTS_IN_SOURCE
        )
        for name in sorted(files):
            path = Path(directory) / name
            if path.is_symlink():
                parts += [relative / name, os.readlink(path)]
            elif path.is_file():
                parts += [relative / name, file_digest(path)]
    return digest(parts)


def source_tree(path: Path) -> SourceTree:
    """The tree at ``path`` and its identity: the checkout's commit where it is the top of a
    git checkout, else a digest of its files."""
    path = path.resolve()
    top = _git(path, "rev-parse", "--show-toplevel") if shutil.which("git") else None
    if top is not None and top.returncode == 0 and Path(top.stdout.decode().strip()).resolve() == path:
        commit = _git(path, "rev-parse", "HEAD").stdout.decode().strip()
        changes = _git(path, "diff", "HEAD", "--submodule=short").stdout
        if changes:
            change_digest = digest([changes])[:8]
            return SourceTree(path, f"{commit}+{change_digest}", f"{commit[:12]}+{change_digest}",
                              f"git commit {commit} with uncommitted changes (digest {change_digest})")
        return SourceTree(path, commit, commit[:12], f"git commit {commit}")
    files = _files_digest(path)
    return SourceTree(path, f"files-{files}", f"files-{files[:12]}",
                      f"files digest {files[:12]}, not a git checkout")


def check_source(source: Path) -> None:
    if not (source / "CMakeLists.txt").is_file() or not (source / "backends" / "vulkan").is_dir():
        raise UsageError(f"{source} is not an ExecuTorch source tree (no CMakeLists.txt and backends/vulkan); "
                         "pass --source the top of an ExecuTorch checkout")
    empty = [name for name in RUNNER_SUBMODULES if not any((source / name).glob("*"))]
    if empty:
        raise UsageError(f"{source} lacks the submodules {', '.join(empty)}: run git submodule update --init "
                         f"{' '.join(empty)} there, or put those repositories' trees at these paths")


def cloned_source() -> Path:
    """A shallow clone of the tag of the installed executorch, with the runner's submodules,
    in the cache (reused); without internet, a one-line error saying to pass --source."""
    version = importlib.metadata.version("executorch").split("+")[0]
    tag = f"v{version}"
    source = runtime_dir() / "source" / tag / "executorch"
    if (source / ".git").exists() and (source / RUNNER_SUBMODULES[0] / "include").is_dir():
        return source
    if not shutil.which("git"):
        raise UsageError(f"no git here to clone ExecuTorch {tag}; pass --source DIR, an ExecuTorch source tree")
    shutil.rmtree(source, ignore_errors=True)
    source.parent.mkdir(parents=True, exist_ok=True)
    say(f"cloning ExecuTorch {tag} (the installed executorch is {version}) into {source}")
    failed = _git_fetch("clone", "--quiet", "--depth", "1", "--branch", tag, EXECUTORCH_GIT_URL, str(source))
    if failed:
        shutil.rmtree(source, ignore_errors=True)
        raise UsageError(f"could not clone ExecuTorch {tag} from {EXECUTORCH_GIT_URL} ({failed}); without "
                         "internet, pass --source DIR, an ExecuTorch source tree with its submodules")
    update = ("-C", str(source), "submodule", "update", "--init", "--depth", "1", "--")
    failed = _git_fetch(*update, *RUNNER_SUBMODULES)
    if failed:
        raise UsageError(f"could not fetch ExecuTorch's submodules into {source} ({failed}); "
                         "pass --source DIR, an ExecuTorch source tree with its submodules")
    _git_fetch(*update, JSON_SUBMODULE)  # where its pin cannot be had, the build stages a stand-in
    return source


def staged_source(source: Path, build: Path) -> Path:
    """The tree as the build sees it: itself where it is named ``executorch`` and complete;
    else ``BUILD/source/executorch``, links to its entries with the stand-in for json."""
    json_missing = not (source / JSON_SUBMODULE / "CMakeLists.txt").is_file()
    if source.name == "executorch" and not json_missing:
        return source
    staged = build / "source" / "executorch"
    shutil.rmtree(staged.parent, ignore_errors=True)
    staged.mkdir(parents=True)
    for entry in source.iterdir():
        if not (json_missing and entry.name == "third-party"):
            (staged / entry.name).symlink_to(entry)
    if json_missing:
        say(f"{source / JSON_SUBMODULE} is empty: building with a stand-in (the runner does not use nlohmann/json)")
        third_party = staged / "third-party"
        third_party.mkdir()
        for entry in (source / "third-party").iterdir():
            if entry.name != "json":
                (third_party / entry.name).symlink_to(entry)
        (third_party / "json").mkdir()
        (third_party / "json" / "CMakeLists.txt").write_text(JSON_STAND_IN)
    return staged
