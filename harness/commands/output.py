"""What the command line shows besides its result: a sweep's progress on stderr, and
records on stdout as a table, JSON or CSV."""

import threading

from harness.commands import say
from harness.errors import UsageError
from harness.results.schema import CONTEXT_KEYS, METRICS
from harness.sweep.fork_server import FORK_LOCK
from layoutkit import strict_json

REDRAW_SECONDS = 0.1


class SweepProgress:
    """Sweep progress on stderr: a bar over model x strategy with the current stage, from
    when the sweep is planned (:meth:`begin`); where stderr is not a terminal (a log file,
    CI), a line per finished record instead."""

    def __init__(self):
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        console = Console(stderr=True)
        self._lines = not console.is_terminal
        self._progress = Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            console=console, transient=False, disable=self._lines, auto_refresh=False,
        )
        self._task = None
        self._done = threading.Event()
        self._redraw = threading.Thread(target=self._redraw_until_done, daemon=True)

    def __enter__(self):
        return self

    def begin(self, total: int) -> None:
        self._task = self._progress.add_task("starting", total=total)
        self._progress.start()
        if not self._lines:
            self._redraw.start()

    def __exit__(self, *exc):
        self._done.set()
        if self._redraw.is_alive():
            self._redraw.join()
        with FORK_LOCK:
            self._progress.stop()

    def _redraw_until_done(self) -> None:
        while not self._done.wait(REDRAW_SECONDS):
            with FORK_LOCK:
                self._progress.refresh()

    def stage(self, text: str) -> None:
        with FORK_LOCK:
            self._progress.update(self._task, description=text)

    def advance(self, record: dict | None = None) -> None:
        with FORK_LOCK:
            self._progress.advance(self._task)
            if self._lines and record is not None:
                task = self._progress.tasks[0]
                what = f"{record['model']} / {record['strategy'] or record['target']}"
                say(f"[{task.completed:.0f}/{task.total:.0f} {task.elapsed:.0f} s] {what}: {record['status']}")


def _chosen_columns(columns: str | None) -> str | list[str] | None:
    """``--columns`` as the table takes it: None (each target's headline metrics), all, or the fields named."""
    return columns if columns in (None, "all") else [c.strip() for c in columns.split(",") if c.strip()]


def check_columns(columns: str | None, strategy_names: list[str]) -> None:
    """Refuse, before anything is measured, a ``--columns`` field no record can have: one the
    record schema does not know, where every strategy is a built-in (whose own fields the
    schema lists; a plug-in may add any, so its records are what :func:`render_records` checks)."""
    import strategies

    chosen = _chosen_columns(columns)
    if not isinstance(chosen, list) or not all(strategies.is_built_in(s) for s in strategy_names):
        return
    known = {*CONTEXT_KEYS, *METRICS}
    unknown = [c for c in chosen if c not in known]
    if unknown:
        raise UsageError(f"--columns: no record has {', '.join(unknown)}; fields: all, {', '.join(sorted(known))}")


def render_records(records: list[dict], output_format: str, columns: str | None) -> str:
    """Records as the command line prints them: a table (``columns``: all, a comma list, or
    each target's headline metrics), JSON or CSV."""
    if output_format == "json":  # before importing pandas, which JSON does not need (a second)
        return strict_json.dumps(records, indent=1, default=str)
    import pandas as pd

    from harness.results.table import render_table

    if output_format == "csv":
        return pd.DataFrame(records).to_csv(index=False)
    chosen = _chosen_columns(columns)
    if isinstance(chosen, list):
        fields = set().union(*records) if records else set()
        unknown = [c for c in chosen if c not in fields]
        if unknown:
            raise UsageError(f"--columns: no record has {', '.join(unknown)}; fields: {', '.join(sorted(fields))} "
                             "(the records are kept: the same command again prints them)")
    return render_table(records, chosen)
