"""Debian trixie's packages, unpacked into a private directory and run through its own
dynamic loader, for tools that need a newer glibc (or a newer build) than the host has: the Arm
ML SDK's binaries (:mod:`harness.targets.arm.vgf_host`) and the glslc that compiles ET-VK's
shaders (:mod:`harness.targets.vulkan.local.runtime_build`). :func:`fetch` runs apt-get with
lists and a cache of its own: nothing on the system changes.
"""

import shutil
import subprocess
from pathlib import Path

from layoutkit.errors import last_line
from layoutkit.files import cache_folder

TRIXIE_SOURCE = "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main"
# The C/C++ runtime every fetched binary starts with.
RUNTIME_PACKAGES = ("libc6", "libstdc++6", "libgcc-s1")
SYSTEM_LIBRARIES = ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu")


def host_dir() -> Path:
    """The fetched packages' folder (named for its first user, the VGF tools)."""
    return cache_folder("vgf-host")


def root() -> Path:
    """Where the packages are unpacked: a file system root of their own."""
    return host_dir() / "root"


def library_dir() -> Path:
    return root() / "usr/lib/x86_64-linux-gnu"


def loader() -> Path:
    return library_dir() / "ld-linux-x86-64.so.2"


def fetch(packages: tuple[str, ...], purpose: str, error: type[Exception]) -> None:
    """Download ``packages`` (with :data:`RUNTIME_PACKAGES`) from trixie and unpack them into
    :func:`root`; raises ``error`` with one line saying why, naming ``purpose``."""
    apt_get, dpkg_deb = shutil.which("apt-get"), shutil.which("dpkg-deb")
    if not (apt_get and dpkg_deb):
        raise error(f"fetching Debian trixie's packages for {purpose} needs apt-get and dpkg-deb; neither is here")
    apt, debs = host_dir() / "apt", host_dir() / "debs"
    for directory in (apt / "lists" / "partial", apt / "cache" / "archives" / "partial", debs):
        directory.mkdir(parents=True, exist_ok=True)
    (apt / "sources.list").write_text(TRIXIE_SOURCE + "\n")
    options = [
        "-o", f"Dir::Etc::SourceList={apt / 'sources.list'}", "-o", "Dir::Etc::SourceParts=/dev/null",
        "-o", f"Dir::State::Lists={apt / 'lists'}", "-o", f"Dir::Cache={apt / 'cache'}",
        "-o", "APT::Sandbox::User=root", "-o", "Debug::NoLocking=1", "-qq",
    ]
    wanted = sorted(set(RUNTIME_PACKAGES) | set(packages))
    for command in ([apt_get, *options, "update"], [apt_get, *options, "download", *wanted]):
        done = subprocess.run(command, cwd=debs, capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            raise error(f"could not fetch Debian trixie's packages for {purpose}: {last_line(done.stderr)}")
    for deb in sorted(debs.glob("*.deb")):
        subprocess.run([dpkg_deb, "-x", str(deb), str(root())], check=True, timeout=300)


def start_command(binary: Path, library_path: list[str]) -> str:
    """The shell line that starts ``binary`` through the private loader, finding libraries
    in ``library_path`` (the private ones first, then the system's), with the script's arguments."""
    return f'exec "{loader()}" --library-path "{":".join(library_path)}" "{binary}" "$@"'
