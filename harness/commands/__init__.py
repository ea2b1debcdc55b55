"""The command line's commands, each a function of its parsed arguments that returns the
exit status (:mod:`harness.cli` parses and dispatches): sweeps (run, compare, gate), fitting
and top_up (calibrate), inspections (explain, profile, costs, coverage, preferences), explore
and upkeep (list, report, cache, runtime, serve, dashboard, pack, import-remote)."""

import sys

PROGRAM = "layoutbench"  # how every line the command line writes to stderr begins


def say(line: str) -> None:
    """One line on stderr, where every line besides the result goes."""
    print(f"{PROGRAM}: {line}", file=sys.stderr)
