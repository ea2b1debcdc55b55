"""Worker processes on this machine, or this process, running a sweep's jobs.

Each job (one model, :mod:`harness.sweep.job`) runs in a fresh worker forked from a server
that has imported torch, ExecuTorch and the harness once (:mod:`harness.sweep.fork_server`), so
a crash, a kill or a limit ends one worker, not the sweep. A worker reports each measurement as
it starts and each record as it is made; when one ends before its job, :class:`JobTracker`
fails the measurement it was in (naming the signal or the limit, and where native code crashed
as faulthandler saw it) and hands the strategies left to a new worker. A crash while building
the model fails every strategy left, since each would build it again. Only the sweep writes
records, so lines never interleave.

Local workers take turns: ``count`` of them build and measure at once, and one more starts
early and reads its model's shared stages from the disk caches (a lowering prefix: no
computing) meanwhile, so a warm sweep does not wait for each model's load in turn. None starts
early where the target runs programs: a load beside a timed run would disturb it.
"""

import contextlib
import faulthandler
import os
import pickle
import re
import signal
import sys
import threading
import time
from collections import deque
from dataclasses import replace
from multiprocessing.connection import wait
from pathlib import Path

import psutil

from harness import cache_limit
from harness.results.results_dir import ResultsDir, remove_if_empty
from harness.sweep import fork_server
from harness.sweep.events import BuildingModel, Measuring, Recorded, WorkerEvent
from harness.sweep.job import Job, run_job
from harness.targets import get_target

POLL_SECONDS = 0.5
GIB = 1 << 30
_MODEL_STAGE = object()  # a worker building the model (or not started yet)
_BETWEEN = object()  # a worker between two measurements
# Signals of a crash in the worker's own code (not a kill from outside: SIGKILL, SIGTERM).
_CRASHES = {signal.SIGSEGV, signal.SIGBUS, signal.SIGILL, signal.SIGFPE, signal.SIGABRT}


def crash_site(log: Path) -> str | None:
    """Where the crashed thread was, from a faulthandler dump: ``package/file.py:line (function)``."""
    text = log.read_text(errors="replace") if log.is_file() else ""
    current = text.split("Current thread", 1)  # the thread that crashed; the others are listed too
    frame = re.search(r'File "([^"]+)", line (\d+) in (\S+)', current[-1]) if len(current) > 1 else None
    if frame is None:
        return None
    path = re.sub(r".*/((site|dist)-packages|python3\.\d+)/", "", frame.group(1))
    if Path(path).is_relative_to(Path.cwd()):
        path = str(Path(path).relative_to(Path.cwd()))
    return f"{path}:{frame.group(2)} ({frame.group(3)})"


def crashed(exitcode: int | None) -> bool:
    """Whether a worker's exit code is a crash of its own code, which its measurement would repeat."""
    return exitcode is not None and exitcode < 0 and -exitcode in _CRASHES


def death_reason(exitcode: int | None) -> str:
    """What ended a worker, from its exit code."""
    if exitcode is not None and exitcode < 0:
        name = signal.Signals(-exitcode).name
        hint = " (the kernel's OOM killer sends it, as does kill -9)" if -exitcode == signal.SIGKILL else ""
        return f"worker killed by {name}{hint}"
    return f"worker exited with status {exitcode} before finishing"


class JobTracker:
    """What a worker reported of its job: the measurement in progress and the ones done."""

    def __init__(self, job: Job):
        self.job = job
        self.current = _MODEL_STAGE
        self.done: set = set()

    def on(self, event: WorkerEvent) -> WorkerEvent:
        """Follow one of the worker's events; the event, for the sweep."""
        if isinstance(event, BuildingModel):
            self.current = _MODEL_STAGE
        elif isinstance(event, Measuring):
            self.current = event.strategy
        elif isinstance(event, Recorded):
            self.done.add(event.record["strategy"])
            self.current = _BETWEEN
        return event

    @property
    def finished(self) -> bool:
        """Whether every strategy of the job has its record (the worker is only ending)."""
        return self.done.issuperset(self.job.strategies)

    def ended(self, reason: str, log: str | None = None, repeatable: bool = False) -> tuple[list[Recorded], Job | None]:
        """Events for a worker that ended before its job did, and the job left to do;
        ``repeatable``: a crash the same measurement would repeat (see :func:`crashed`)."""
        left = [s for s in self.job.strategies if s not in self.done]
        if not left:
            return [], None
        if self.current is _MODEL_STAGE:
            failing, where = left, "while building the model (export, lowering prefix)"
        elif self.current is _BETWEEN:
            failing, where = [], ""
        else:
            failing, where = [self.current], f"while measuring {self.current or self.job.target}"
        target = get_target(self.job.target)
        fields = dict.fromkeys(target.metrics)  # every record of a target has its keys
        if log:
            fields["log"] = log
        fields["repeatable"] = repeatable and target.failures_repeat
        events = [Recorded(self.job.record(s, "failed", f"{reason} {where}", **fields)) for s in failing]
        rest = [s for s in left if s not in failing]
        return events, replace(self.job, strategies=rest) if rest else None


class InProcess:
    """Every job in this process: no isolation (for debugging, or a test that patches the harness)."""

    def run(self, jobs: list[Job], handle) -> None:
        for job in jobs:
            tracker = JobTracker(job)
            run_job(job, lambda event: handle(tracker.on(event)))


def _exit_with(sweep_pid: int, crash_log: Path) -> None:
    """End this worker when the sweep that started it is gone (killed with no chance to end it)."""
    while True:
        time.sleep(2 * POLL_SECONDS)
        try:
            os.kill(sweep_pid, 0)
        except ProcessLookupError:
            remove_if_empty(crash_log)
            os._exit(1)


def _worker_main(job: Job, connection, crash_log: str, sweep_pid: int) -> None:
    # A Ctrl-C is the sweep's to handle: it ends its workers (see fork_server._ensure_running;
    # forked from the sweep itself, see fork_server.fork_from_here, a worker has its handler).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Forked from the sweep itself, it may have inherited a progress display's stand-ins for
    # the streams: its output goes to the real ones.
    sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
    threading.Thread(target=_exit_with, args=(sweep_pid, Path(crash_log)), daemon=True).start()
    with open(crash_log, "w") as log:
        faulthandler.enable(file=log)
        with contextlib.suppress(EOFError, BrokenPipeError):  # the sweep is gone: no one is left to tell
            run_job(job, connection.send, wait_turn=connection.recv)
    Path(crash_log).unlink(missing_ok=True)  # the sweep may have removed it, empty, as it ended
    cache_limit.release()  # multiprocessing ends a worker with os._exit, which runs no atexit


class _Running:
    def __init__(self, process, connection, job: Job, crash_log: Path):
        self.process, self.connection, self.crash_log = process, connection, crash_log
        self.tracker = JobTracker(job)
        self.turn = False  # whether it may build and measure (see the module)
        self.started = time.monotonic()  # of its turn, once it has one
        self.limit: str | None = None  # set when the sweep ends the worker for a limit


class LocalWorkers:
    """Jobs in up to ``count`` worker processes at once, and one started early (see the
    module); ``time_limit`` (seconds, from a worker's turn) and ``memory_limit`` (bytes of
    resident memory, the worker's children included) per job."""

    def __init__(self, count: int, time_limit: float | None = None, memory_limit: int | None = None):
        self.count, self.time_limit, self.memory_limit = count, time_limit, memory_limit
        self._started = 0

    def run(self, jobs: list[Job], handle) -> None:
        """Run ``jobs``, calling ``handle`` with each event (see :class:`JobTracker`)."""
        context = fork_server.context()
        pending, running = deque(jobs), []
        early = 0 if any(get_target(job.target).runs_programs for job in jobs) else 1
        try:
            while pending or running:
                while pending and len(running) < self.count + early:
                    self._start(context, pending.popleft(), running)
                self._give_turns(running)
                wait([r.connection for r in running] + [r.process.sentinel for r in running], POLL_SECONDS)
                for worker in list(running):
                    alive = worker.process.is_alive()  # before draining: an ended worker's last records are read
                    self._drain(worker, handle)
                    if alive:
                        self._check_limits(worker)
                        continue
                    running.remove(worker)
                    events, rest = self._ended(worker)
                    for event in events:
                        handle(event)
                    if rest is not None:
                        pending.appendleft(rest)
        finally:
            for worker in running:
                if worker.process.pid is not None:  # not one whose start failed (psutil would take None for us)
                    _kill_with_children(worker.process)
            # every empty log of this sweep's workers, whichever of them still ran
            for results_dir in {job.context.results_dir for job in jobs}:
                for log in ResultsDir(results_dir).worker_crash_logs(os.getpid()):
                    remove_if_empty(log)

    def _start(self, context, job: Job, running: list[_Running]) -> None:
        """A worker for ``job``, in ``running`` before it starts: an interrupt that comes as it
        starts still finds it to end."""
        ours, workers = context.Pipe()
        self._started += 1
        crash_log = ResultsDir(job.context.results_dir).worker_crash_log(os.getpid(), self._started)
        crash_log.parent.mkdir(parents=True, exist_ok=True)
        process = context.Process(target=_worker_main, args=(job, workers, str(crash_log), os.getpid()),
                                  daemon=True)
        running.append(_Running(process, ours, job, crash_log))
        with fork_server.FORK_LOCK, _interrupts_held():
            process.start()
        workers.close()

    def _give_turns(self, running: list[_Running]) -> None:
        """A turn to each waiting worker, in the order they started, while fewer than ``count``
        have one and still measure (one whose records are all in is only ending)."""
        free = self.count - sum(worker.turn and not worker.tracker.finished for worker in running)
        for worker in [w for w in running if not w.turn][:max(free, 0)]:
            worker.turn, worker.started = True, time.monotonic()
            with contextlib.suppress(OSError):  # it ended meanwhile: its sentinel says how
                worker.connection.send(True)

    @staticmethod
    def _drain(worker: _Running, handle) -> None:
        while True:
            try:
                if not worker.connection.poll():
                    return
                message = worker.connection.recv()
            except (EOFError, OSError, pickle.UnpicklingError):  # the worker is gone; its sentinel says how
                return
            handle(worker.tracker.on(message))

    def _check_limits(self, worker: _Running) -> None:
        if self.time_limit and worker.turn and time.monotonic() - worker.started > self.time_limit:
            worker.limit = f"time limit of {self.time_limit:g} s reached"
        elif self.memory_limit:
            resident = _resident_bytes(worker.process.pid)
            if resident > self.memory_limit:
                worker.limit = (f"memory limit of {self.memory_limit / GIB:.1f} GiB exceeded "
                                f"({resident / GIB:.2f} GiB resident)")
        if worker.limit:
            _kill_with_children(worker.process, wait=False)

    @staticmethod
    def _ended(worker: _Running) -> tuple[list[Recorded], Job | None]:
        worker.process.join()
        worker.connection.close()
        reason = worker.limit or death_reason(worker.process.exitcode)
        site = None if worker.limit else crash_site(worker.crash_log)
        if site:
            reason += f" in {site}"
        log = None
        if worker.crash_log.is_file() and worker.crash_log.stat().st_size > 0:
            job, current = worker.tracker.job, worker.tracker.current
            stage = current if current not in (_MODEL_STAGE, _BETWEEN) else None
            log = ResultsDir(job.context.results_dir).log(job.model, stage, job.target, ".crash.log").resolve()
            worker.crash_log.replace(log)
        worker.crash_log.unlink(missing_ok=True)
        repeatable = worker.limit is None and crashed(worker.process.exitcode)
        return worker.tracker.ended(reason, str(log) if log else None, repeatable)


@contextlib.contextmanager
def _interrupts_held():
    """Ctrl-C and SIGTERM held until the block ends, then taken as they came: one that lands
    halfway through a request to the fork server makes it print an EOFError traceback."""
    if threading.current_thread() is not threading.main_thread():  # a Ray task's thread: no signals here
        yield
        return
    held = []
    previous = {number: signal.signal(number, lambda number, frame: held.append(number))
                for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        for number in held:
            signal.raise_signal(number)


def _kill_with_children(process, wait: bool = True) -> None:
    """End a worker and what it started (a tool it runs ignores Ctrl-C, as the worker does)."""
    with contextlib.suppress(psutil.NoSuchProcess):
        for child in psutil.Process(process.pid).children(recursive=True):
            child.kill()
    process.kill()
    if wait:
        process.join()


def _resident_bytes(pid: int) -> int:
    try:
        process = psutil.Process(pid)
        return sum(p.memory_info().rss for p in [process, *process.children(recursive=True)])
    except psutil.NoSuchProcess:  # it ended meanwhile
        return 0
