"""Make asv's published dashboard work without internet access.

``asv publish`` writes pages that load jQuery, flot, bootstrap and friends from CDNs, so on a CI machine
whose only network is the package registries the dashboard stays blank ("failed to load 3rd-party
scripts"). ``vendor`` fetches the same library versions from the npm registry (``npm pack``, cached),
copies the files next to the pages and points the pages at them; a CDN address it does not know (a newer
asv) is an error naming it.
"""

import re
import shutil
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

from layoutkit.errors import LayoutbenchError, last_line
from layoutkit.files import cache_folder

VENDOR_DIR = "vendor"


@dataclass(frozen=True)
class NpmFile:
    """Where the npm registry has what a CDN address serves (same library and version)."""

    package: str  # npm spec, name@version
    path: str  # inside the package
    companions: tuple[str, ...] = ()  # files the first one refers to relatively (fonts of a stylesheet)


CDN_FILES = {
    "https://code.jquery.com/jquery-3.3.1.min.js": NpmFile("jquery@3.3.1", "dist/jquery.min.js"),
    **{
        f"https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot{part}.min.js":
            NpmFile("flot@0.8.3", f"jquery.flot{part}.js")  # npm has flot unminified only
        for part in ("", ".time", ".selection", ".categories")
    },
    "https://cdn.jsdelivr.net/npm/flot-orderbars@1.0.0/js/jquery.flot.orderBars.js":
        NpmFile("flot-orderbars@1.0.0", "js/jquery.flot.orderBars.js"),
    # cdnjs's 1.0.1 was never published to npm; 1.1.3 has the same $.fn.stupidtable API.
    "https://cdnjs.cloudflare.com/ajax/libs/stupidtable/1.0.1/stupidtable.min.js":
        NpmFile("stupid-table-plugin@1.1.3", "stupidtable.min.js"),
    "https://cdnjs.cloudflare.com/ajax/libs/blueimp-md5/2.19.0/js/md5.min.js":
        NpmFile("blueimp-md5@2.19.0", "js/md5.min.js"),
    "https://cdn.jsdelivr.net/npm/bootstrap@3.1.1/dist/js/bootstrap.min.js":
        NpmFile("bootstrap@3.1.1", "dist/js/bootstrap.min.js"),
    "https://cdn.jsdelivr.net/npm/bootstrap@3.1.1/dist/css/bootstrap.min.css":
        NpmFile("bootstrap@3.1.1", "dist/css/bootstrap.min.css", tuple(
            f"dist/fonts/glyphicons-halflings-regular.{ext}" for ext in ("eot", "svg", "ttf", "woff"))),
}

# A script or stylesheet reference to a remote address (links to asv's homepage stay).
_REMOTE_ASSET = re.compile(r'<(script|link)\b[^>]*?(?:src|href)="(https?://[^"]+)"[^>]*>')
_CHECK_ATTRIBUTES = re.compile(r'\s(?:integrity|crossorigin|referrerpolicy)="[^"]*"')


class DashboardError(LayoutbenchError):
    """The dashboard cannot be made to work offline."""


def _tarball(package: str) -> Path:
    cache = cache_folder("npm")
    name, _, version = package.rpartition("@")
    tarball = cache / f"{name.replace('/', '-')}-{version}.tgz"
    if tarball.exists():
        return tarball
    npm = shutil.which("npm")
    if npm is None:
        raise DashboardError("npm is not installed; it fetches the dashboard's scripts (apt-get install npm)")
    done = subprocess.run([npm, "pack", package, "--silent", "--pack-destination", str(cache)],
                          capture_output=True, text=True, timeout=300)
    if done.returncode != 0 or not tarball.exists():
        raise DashboardError(f"npm pack {package} failed: {last_line(done.stderr)}")
    return tarball


def _extract(npm_file: NpmFile, html_dir: Path) -> Path:
    """Copy the file (and its companions) to html_dir/vendor/<package>/; its path relative to html_dir."""
    target_root = html_dir / VENDOR_DIR / npm_file.package
    with tarfile.open(_tarball(npm_file.package)) as archive:
        for path in (npm_file.path, *npm_file.companions):
            member = archive.extractfile(f"package/{path}")
            if member is None:
                raise DashboardError(f"npm package {npm_file.package} has no {path}")
            target = target_root / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(member.read())
    return (target_root / npm_file.path).relative_to(html_dir)


def vendor(html_dir: str | Path) -> int:
    """Point every page of an ``asv publish`` output at local copies of its CDN assets.

    Returns how many references were rewritten; running it again rewrites none."""
    html_dir = Path(html_dir)
    pages = sorted(html_dir.glob("*.html"))
    if not pages:
        raise DashboardError(f"{html_dir} holds no HTML pages; run asv publish first")
    rewritten = 0
    for page in pages:
        text = page.read_text()
        for tag, address in sorted({(m.group(1), m.group(2)) for m in _REMOTE_ASSET.finditer(text)}):
            if address not in CDN_FILES:
                raise DashboardError(f"{page.name} loads {address}, which harness/results/dashboard.py does not know; "
                                     "add it to CDN_FILES")
            local = _extract(CDN_FILES[address], html_dir).as_posix()
            text, count = re.subn(rf'<{tag}\b[^>]*?"{re.escape(address)}"[^>]*>',
                                  lambda m: _CHECK_ATTRIBUTES.sub("", m.group(0)).replace(address, local), text)
            rewritten += count
        page.write_text(text)
    return rewritten
