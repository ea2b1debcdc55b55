"""The programs of a results directory packed for another machine (``layoutbench pack``).

Both forms leave the programs' float and int8 weights out (:mod:`harness.targets.vulkan.remote.weightless`:
their values do not change an ET-VK program's time) unless asked to keep them (``--weights``: then
the outputs computed there come back and import-remote holds them to eager PyTorch's), and carry
each program's inputs, one copy of identical ones (a hard link):

- **for remote_runner.py** (Python there): a tar in the results directory's layout, each
  program at its full length with its weights zeroed, so the tar compresses to almost nothing,
  and its manifest (``.weights.json``);
- **a bundle for remote_runner.sh** (an executor_runner but no Python: a phone, a board),
  a directory or a tar::

      run.sh                      the POSIX sh script (``harness/targets/vulkan/remote/remote_runner.sh``)
      programs.list               one line per program: its number of inputs, its name
      fill/<TYPE>.bin             weightless.random_blocks(), one block per weight type used
      programs/<model>/<strategy>.cut      the program without its weights' bytes
                          .splices  how run.sh splices them back in (:func:`cut`)
                          .inputs/  its inputs, as vulkan-run wrote them
      executor_runner             with --runner: the runner run.sh uses by default

  A bundle's programs are cut rather than zeroed because a directory travels whole: adb push
  and scp copy every zero, and a phone stores them. run.sh splices the blocks back in, byte for
  byte what ``weightless.refill`` makes, one program at a time. With ``--weights`` a program's
  cut is the whole program, its .splices one line and no ``fill/``: run.sh runs the cut as it is.
"""

import hashlib
import io
import json
import os
import shutil
import tarfile
from pathlib import Path

from harness.errors import UsageError
from harness.targets.vulkan.remote import remote_runner, weightless

SCRIPT = Path(__file__).with_name("remote_runner.sh")
BUNDLE_SCRIPT = "run.sh"
PROGRAM_LIST = "programs.list"
CUT_SUFFIX = ".cut"
SPLICES_SUFFIX = ".splices"
BUNDLE_RUNNER = "executor_runner"
TAR_MODES = {".tar": "w", ".gz": "w:gz", ".tgz": "w:gz", ".xz": "w:xz"}


class _Writer:
    """Files written into a tar or a directory; a file with the bytes of one written before is a
    hard link to it."""

    def __init__(self, out: Path):
        self.out, self.seen = out, {}
        if out.suffix not in TAR_MODES and out.exists() and (not out.is_dir() or any(out.iterdir())):
            raise UsageError(f"{out} exists and is not an empty directory: name a new one, or a .tar, "
                             ".tar.gz or .tar.xz")
        try:
            self.tar = tarfile.open(out, TAR_MODES[out.suffix]) if out.suffix in TAR_MODES else None
            if self.tar is None:
                out.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise UsageError(f"cannot write {out}: {error.strerror}") from None

    def add(self, name: str, data: bytes, mode: int = 0o644) -> None:
        digest = hashlib.sha256(data).digest() + bytes([mode & 0o111 != 0])
        earlier = self.seen.setdefault(digest, name)
        if self.tar is not None:
            member = tarfile.TarInfo(name)
            member.mode = mode
            if earlier != name:
                member.type, member.linkname = tarfile.LNKTYPE, earlier
                self.tar.addfile(member)
            else:
                member.size = len(data)
                self.tar.addfile(member, io.BytesIO(data))
            return
        path = self.out / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if earlier != name:
            os.link(self.out / earlier, path)
        else:
            path.write_bytes(data)
            path.chmod(mode)

    def close(self, finished: bool) -> None:
        """The tar closed; what was written removed where it was not ``finished``."""
        if self.tar is not None:
            self.tar.close()
        if finished:
            return
        if self.tar is None:
            shutil.rmtree(self.out)
        else:
            self.out.unlink()


def _places(manifest: list[dict]) -> list[dict]:
    """The regions of a manifest in program order, each once: weights that share their bytes share
    a segment, listed once per weight; the last one's type is the one ``refill`` leaves there."""
    return sorted({region["offset"]: region for region in manifest}.values(), key=lambda region: region["offset"])


def cut(stripped: bytes, places: list[dict]) -> tuple[bytes, str]:
    """``stripped`` without the bytes of ``places`` (the regions of :func:`_places`), and how run.sh
    splices the program back: a line per region, "START LENGTH SIZE TYPE" (LENGTH bytes of the cut
    from its byte START, counted from 1 as ``tail -c +START`` counts, then SIZE bytes of TYPE's
    block repeated), and last "START LENGTH", the cut's rest. Every position is computed here: the
    sh of Android (mksh) computes in 32 bits, and a program may pass 2 GiB."""
    pieces, lines, position, kept = [], [], 0, 0
    for region in places:
        pieces.append(stripped[position:region["offset"]])
        lines.append(f"{kept + 1} {len(pieces[-1])} {region['size']} {region['dtype']}\n")
        kept += len(pieces[-1])
        position = region["offset"] + region["size"]
    pieces.append(stripped[position:])
    lines.append(f"{kept + 1} {len(pieces[-1])}\n")
    return b"".join(pieces), "".join(lines)


def _write(results: Path, out: Path, add_program, add_rest=lambda writer: None, weights: bool = False) -> int:
    """Each program of ``results`` stripped (unless ``weights``) and handed to ``add_program`` with
    its name, its inputs added beside it, then ``add_rest``; nothing is left at ``out`` where that fails."""
    programs = remote_runner.list_programs(results)
    if not programs:
        raise UsageError(f"no programs under {results / 'programs'}: run --target vulkan-run into {results} first")
    writer, finished = _Writer(out), False
    # with its weights, a program is sent as it is, no region to refill: its outputs are eager PyTorch's
    prepare = (lambda program: (program, [])) if weights else weightless.strip
    try:
        for program in programs:
            name = str(program.relative_to(results))
            try:
                add_program(writer, name, *prepare(program.read_bytes()))
            except ValueError as error:
                raise UsageError(f"{program}: {error}") from None
            for input_file in remote_runner.program_inputs(program):
                writer.add(str(input_file.relative_to(results)), input_file.read_bytes())
        add_rest(writer)
        finished = True
    finally:
        writer.close(finished)
    return len(programs)


def pack(results: Path, out: Path, weights: bool = False) -> int:
    """The tar ``out`` (compressed as its suffix says) of every program under ``results/programs``
    for ``remote_runner.py``; the number of programs. With ``weights``, each as it is (no
    manifest): its outputs there are then held to eager's."""
    if Path(out).suffix not in TAR_MODES:
        raise UsageError(f"{out}: name a .tar, .tar.gz or .tar.xz (add --bundle for a directory)")

    def add_program(writer: _Writer, name: str, program: bytes, manifest: list[dict]) -> None:
        writer.add(name, program)
        if not weights:
            writer.add(name.removesuffix(".pte") + weightless.MANIFEST_SUFFIX, json.dumps(manifest).encode())

    return _write(Path(results), Path(out), add_program, weights=weights)


def pack_bundle(results: Path, out: Path, runner: Path | None = None, weights: bool = False) -> int:
    """The bundle of every program under ``results/programs`` for ``remote_runner.sh``: a directory
    ``out``, or a tar where its suffix names one; the number of programs. With ``weights``, each
    program's cut is the whole program (its .splices one line, nothing to fill)."""
    results, listing, types = Path(results), [], set()

    def add_program(writer: _Writer, name: str, program: bytes, manifest: list[dict]) -> None:
        places = _places(manifest)
        stem = name.removesuffix(".pte")
        kept, splices = cut(program, places)
        writer.add(stem + CUT_SUFFIX, kept)
        writer.add(stem + SPLICES_SUFFIX, splices.encode())
        types.update(region["dtype"] for region in places)
        listing.append(f"{len(remote_runner.program_inputs(results / name))} {name}\n")

    def add_rest(writer: _Writer) -> None:
        blocks = weightless.random_blocks()
        for dtype in sorted(types):
            writer.add(f"fill/{dtype}.bin", blocks[dtype])
        writer.add(PROGRAM_LIST, "".join(listing).encode())
        writer.add(BUNDLE_SCRIPT, SCRIPT.read_bytes(), 0o755)
        if runner is not None:
            writer.add(BUNDLE_RUNNER, Path(runner).read_bytes(), 0o755)

    if runner is not None and not (Path(runner).is_file() and os.access(runner, os.X_OK)):
        raise UsageError(f"--runner {runner} is not an executable file")
    return _write(results, Path(out), add_program, add_rest, weights)
