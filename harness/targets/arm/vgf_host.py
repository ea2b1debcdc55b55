"""The host side of the ``vgf`` target: the Arm ML SDK's binaries, runnable on this machine.

The model converter, scenario runner and ML emulation layer wheels (0.10.0) ship binaries
built for glibc >= 2.38, and the emulation layers only load in order under a Vulkan
loader >= 1.4. On an older host (Debian 12: glibc 2.36, loader 1.3.239) ``prepare``
fetches Debian trixie's libc6, libstdc++6, libgcc-s1 and libvulkan1 with apt-get into a
private directory (nothing on the system changes; :mod:`harness.targets.debian_trixie`)
and writes wrappers that start each tool through that directory's dynamic loader.
Inference runs on Mesa's lavapipe CPU driver (Debian ``mesa-vulkan-drivers``) unless
``LAYOUTBENCH_VULKAN_ICD`` names another (:class:`harness.targets.base.HostSettings`).

``python -m harness.targets.arm.vgf_host`` (run by ``make``) prepares the host, or says in one line
why it cannot; ``tools(driver)`` hands the ready tools to the harness, or raises that line.
"""

import importlib.util
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from harness.errors import TargetUnavailableError
from harness.targets import debian_trixie
from harness.targets.base import HostSettings
from harness.targets.debian_trixie import SYSTEM_LIBRARIES
from layoutkit.errors import last_line
from layoutkit.files import CacheSettings, install

MIN_GLIBC = (2, 38)
MIN_VULKAN_LOADER = (1, 4)
LAVAPIPE_ICD = Path("/usr/share/vulkan/icd.d/lvp_icd.x86_64.json")
EMULATION_LAYERS = "VK_LAYER_ML_Graph_Emulation:VK_LAYER_ML_Tensor_Emulation"
# (python package the wheel installs, binary inside it)
BINARIES = {
    "model-converter": ("model_converter", "binaries/bin/model-converter"),
    "scenario-runner": ("scenario_runner", "binaries/bin/scenario-runner"),
    "vgf_dump": ("vgf_lib", "binaries/bin/vgf_dump"),
}
EMULATION_PACKAGE = "emulation_layer"


class VgfHostError(TargetUnavailableError):
    """This host cannot run the VGF tools; the message says why and what to do."""


@dataclass(frozen=True)
class VgfTools:
    """Commands for the converter, the scenario runner and vgf_dump, and the environment
    the scenario runner needs (emulation layers, Vulkan driver)."""

    model_converter: Path
    scenario_runner: Path
    vgf_dump: Path
    environment: dict


def _package_dir(package: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise VgfHostError(f"the Arm ML SDK wheels are not installed ({package} missing); run make")
    return Path(list(spec.submodule_search_locations)[0])


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:2])


def _system_loader_version() -> tuple[int, ...]:
    for directory in SYSTEM_LIBRARIES:
        for library in sorted(Path(directory).glob("libvulkan.so.1.*")):
            return _version(library.name.removeprefix("libvulkan.so."))
    return (0,)


def needs_private_runtime() -> bool:
    glibc = _version(os.confstr("CS_GNU_LIBC_VERSION") or "glibc 0.0")
    return glibc < MIN_GLIBC or _system_loader_version() < MIN_VULKAN_LOADER


def _write_wrapper(name: str, private: bool) -> Path:
    # a wrapper names this environment's wheel binary, so each Python environment (the project's
    # .venv, an asv environment) has its own; the fetched runtime is shared
    wrapper = Path(sys.prefix) / "layoutbench-vgf-bin" / name
    wrapper.parent.mkdir(parents=True, exist_ok=True)
    package, relative = BINARIES[name]
    binary = _package_dir(package) / relative
    libraries = [str(_package_dir(EMULATION_PACKAGE) / "deploy" / "lib"), *SYSTEM_LIBRARIES]
    if private:
        start = debian_trixie.start_command(binary, [str(debian_trixie.library_dir()), *libraries])
    else:
        start = f'LD_LIBRARY_PATH="{":".join(libraries)}" exec "{binary}" "$@"'
    wrapper.write_text(f"#!/bin/sh\n# Written by harness/vgf_host.py.\n{start}\n")
    wrapper.chmod(0o755)
    return wrapper


def icd(named: str | None) -> Path:
    """The Vulkan driver's ICD file: the one the user ``named``, else lavapipe's."""
    return Path(named or LAVAPIPE_ICD)


def prepare(driver: Path) -> VgfTools:
    """Make the tools runnable here (fetching Debian trixie's C/C++ runtime and Vulkan loader if
    the host needs them) and check that each starts; idempotent."""
    if needs_private_runtime() and not debian_trixie.loader().exists():
        debian_trixie.fetch(("libvulkan1",), "the VGF tools (glibc >= 2.38, Vulkan loader >= 1.4)", VgfHostError)
        unversioned = debian_trixie.library_dir() / "libvulkan.so"  # which scenario-runner dlopens
        unversioned.unlink(missing_ok=True)
        unversioned.symlink_to("libvulkan.so.1")
    prepared = tools(driver)
    for wrapper in (prepared.model_converter, prepared.scenario_runner, prepared.vgf_dump):
        done = subprocess.run([str(wrapper), "--version"], capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            raise VgfHostError(f"{wrapper.name} does not start on this host: {last_line(done.stderr)}")
    return prepared


def tools(driver: Path) -> VgfTools:
    """The tools of this Python environment, the scenario runner's on the Vulkan driver whose
    ICD file is ``driver``, or a one-line reason they cannot run here. Fetches nothing: an
    older host needs ``prepare`` (make) once."""
    if not driver.exists():
        raise VgfHostError(f"no Vulkan driver at {driver}: install Debian's mesa-vulkan-drivers (lavapipe)")
    private = needs_private_runtime()
    if private and not debian_trixie.loader().exists():
        raise VgfHostError(
            "the VGF tools need glibc >= 2.38 and a Vulkan loader >= 1.4, which this host lacks; "
            "run make (python -m harness.targets.arm.vgf_host) to fetch them privately"
        )
    layers = _package_dir(EMULATION_PACKAGE) / "deploy" / "share" / "vulkan" / "explicit_layer.d"
    environment = {"VK_INSTANCE_LAYERS": EMULATION_LAYERS, "VK_ADD_LAYER_PATH": str(layers),
                   "VK_DRIVER_FILES": str(driver), "VK_ICD_FILENAMES": str(driver)}
    wrappers = {name: _write_wrapper(name, private) for name in BINARIES}
    return VgfTools(wrappers["model-converter"], wrappers["scenario-runner"], wrappers["vgf_dump"], environment)


def main() -> int:
    """The start of ``python -m harness.targets.arm.vgf_host``: the cache and the driver its
    environment names."""
    install(CacheSettings.from_environment(os.environ))
    try:
        prepared = prepare(icd(HostSettings.from_environment(os.environ).vulkan_icd))
    except (VgfHostError, subprocess.SubprocessError, OSError) as error:
        print(f"vgf host: not ready: {error}", file=sys.stderr)
        return 1
    runtime = "Debian trixie's runtime in " + str(debian_trixie.root()) if needs_private_runtime() else "the system runtime"
    print(f"vgf host: ready ({runtime}; tools in {prepared.model_converter.parent})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
