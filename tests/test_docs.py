"""The product speaks of what it does, not of how it was made: README, DEVELOPERS.md, docs/
and the code name no path of a particular machine, no tool of the machines it was built
on, no issue of its own tracker, no session or round of its making. Findings say on what
hardware they were measured ("a 2-core x86-64 VM, Debian 12"), not on whose machine."""

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CODE = ("harness", "strategies", "costmodel", "models", "benchmarks", "layoutkit")

# Anywhere: paths of a particular machine or run, the builders' tools, the making of it.
EVERYWHERE = {
    "a path of a particular machine": r"/work/|/root/|/home/\w|(?<!/data/local)/tmp/(?!layoutbench-\{)",
    "a tool of the machines it was built on": r"search tool|device tool|fetch verb|fetch github:|\.mirror\b"
                                              r"|\bduplicates\b|helper session",
    "how it was made": r"this session|earlier rounds|previous rounds?\b|this round\b|other developers'"
                       r"|these machines|\b(?:this|the|our) (?:2|two)-core\b|development machine",
    "an issue of its own tracker": r"\bissues? #?\d+|(?<![&\w])#\d{1,4}\b(?![;\"'\w])",
}
# In prose for people, "this machine" and "here" are the builders' machine (in code they are the user's).
PROSE = {"a machine that is not the reader's": r"this machine|measured here"}


def product_files() -> list[Path]:
    files = [REPO / "README.md", REPO / "DEVELOPERS.md", *sorted((REPO / "docs").rglob("*.md"))]
    files += [path for package in CODE for path in sorted((REPO / package).rglob("*.py"))]
    return files


def findings(text: str, rules: dict) -> list[str]:
    return [f"line {text.count(chr(10), 0, match.start()) + 1}: {what}: {match.group(0)!r}"
            for what, pattern in rules.items() for match in re.finditer(pattern, text, re.IGNORECASE)]


@pytest.mark.parametrize("path", product_files(), ids=lambda path: str(path.relative_to(REPO)))
def test_the_product_does_not_speak_of_its_making(path):
    text = path.read_text()
    found = findings(text, EVERYWHERE | (PROSE if path.suffix == ".md" else {}))
    assert not found, "\n".join(found)


def test_the_rules_catch_what_they_are_for():
    caught = ["the search tool's `fetch github:pytorch/executorch`", "/work/.mirror/pytorch+executorch/repo",
              "--et-runner /root/.cache/x", "/tmp/pytest-of-root/x", "/home/alice/src", "Until issue 30",
              "before #27 landed", "On this two-core machine, shared with other developers' tests",
              "earlier rounds", "in this session"]
    assert all(findings(text, EVERYWHERE) for text in caught), [t for t in caught if not findings(t, EVERYWHERE)]
    assert findings("vulkaninfo on this machine", PROSE)
    fine = ["ExecuTorch PR #19113", 'color="#999999"', "color: #222;", 'f"/tmp/layoutbench-{os.getuid()}"', "drop_duplicates",
            "a pair no earlier round used", "a 2-core x86-64 VM, Debian 12", "~/.cache/layoutbench",
            "adb push bundle /data/local/tmp/lb"]
    assert not [text for text in fine if findings(text, EVERYWHERE)]
