"""A cost table's fitted model built once in a child process before any worker starts.

LightGBM parses a booster in native code: damaged trees crash it (SIGSEGV) or raise deep in a
worker, where the record would blame "building the model". Built here first, in a process
of its own, a damaged table is refused in one line naming its file, and nothing runs. A table
that built is remembered by its digest (which covers every byte of its file), so each table
is checked once per cache."""

import signal
import subprocess
import sys

from costmodel.features import FEATURES
from costmodel.table import CostTable, load
from layoutkit.errors import UsageError, last_line
from layoutkit.files import cache_folder

# Builds the booster read from stdin, as a worker would, and counts its features (argv[1] expected).
_BUILD = ("import sys, lightgbm; booster = lightgbm.Booster(model_str=sys.stdin.read()); "
          "sys.exit(0 if booster.num_feature() == int(sys.argv[1]) else "
          "f'its trees read {booster.num_feature()} features, not {sys.argv[1]}')")


def load_checked(path) -> CostTable:
    """The cost table in ``path`` (see :func:`costmodel.table.load`), its fitted model built."""
    table = load(path)
    booster = table.model.booster_text
    if booster is None:  # a per-operator table: plain numbers, checked as it was parsed
        return table
    checked = cache_folder("checked-tables") / table.digest
    if checked.exists():
        return table
    built = subprocess.run([sys.executable, "-c", _BUILD, str(len(FEATURES))], input=booster, capture_output=True,
                           text=True, timeout=300)
    if built.returncode != 0:
        why = (f"LightGBM crashed on it ({signal.Signals(-built.returncode).name})" if built.returncode < 0
               else last_line(built.stderr, "LightGBM failed"))
        raise UsageError(f"cost table {path}: its fitted model does not load: {why}; fit it again with "
                         "`layoutbench calibrate --fit NODES --table FILE`")
    checked.touch()
    return table
