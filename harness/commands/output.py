"""What the command line shows besides its result: a sweep's progress on stderr, and
records on stdout as a table, JSON or CSV."""

import json
import sys

from harness.commands import PROGRAM


class SweepProgress:
    """Sweep progress on stderr: a bar over model x strategy with the current stage; where
    stderr is not a terminal (a log file, CI), a line per finished record instead."""

    def __init__(self, total: int):
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        console = Console(stderr=True)
        self._lines = not console.is_terminal
        self._progress = Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            console=console, transient=False, disable=self._lines,
        )
        self._task = self._progress.add_task("starting", total=total)

    def __enter__(self):
        self._progress.__enter__()
        return self

    def __exit__(self, *exc):
        return self._progress.__exit__(*exc)

    def stage(self, text: str) -> None:
        self._progress.update(self._task, description=text)

    def advance(self, record: dict | None = None) -> None:
        self._progress.advance(self._task)
        if self._lines and record is not None:
            task = self._progress.tasks[0]
            what = f"{record['model']} / {record['strategy'] or record['target']}"
            print(f"{PROGRAM}: [{task.completed:.0f}/{task.total:.0f} {task.elapsed:.0f} s] {what}: {record['status']}",
                  file=sys.stderr, flush=True)


def render_records(records: list[dict], output_format: str, columns: str | None) -> str:
    """Records as the command line prints them: a table (``columns``: all, a comma list, or
    each target's headline metrics), JSON or CSV."""
    if output_format == "json":  # before importing pandas, which JSON does not need (a second)
        return json.dumps(records, indent=1, default=str)
    import pandas as pd

    from harness.results.table import render_table

    if output_format == "csv":
        return pd.DataFrame(records).to_csv(index=False)
    chosen = columns if columns in (None, "all") else [c.strip() for c in columns.split(",") if c.strip()]
    return render_table(records, chosen)
