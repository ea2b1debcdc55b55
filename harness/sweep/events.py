"""What a worker tells the sweep about its job, as it happens (see :func:`harness.sweep.job.run_job`).

Every event crosses a process boundary (a pipe, a Ray queue), so each is a small frozen
dataclass that pickles. A :class:`~harness.sweep.workers.JobTracker` follows them to know
which measurement a worker was in when it ended; the sweep acts on them in one place
(:func:`harness.sweep.planning.run_sweep`).
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class BuildingModel:
    """The worker builds what every strategy of the model shares (export, lowering prefix)."""

    model: str

    @property
    def stage(self) -> str:
        return f"{self.model}: building the model"


@dataclass(frozen=True)
class Measuring:
    """The worker starts one measurement (``strategy`` is None on targets without one)."""

    model: str
    target: str
    strategy: str | None

    @property
    def stage(self) -> str:
        return f"{self.model}: {self.strategy or self.target}"


@dataclass(frozen=True)
class Recorded:
    """A record is made; ``trace`` is the traceback of an unexpected error, for the sweep to
    keep in the results directory's logs."""

    record: dict
    trace: str | None = None


@dataclass(frozen=True)
class CommandMistake:
    """A measurement found the command line wrong (a UsageError): the sweep stops with it."""

    message: str


WorkerEvent = BuildingModel | Measuring | Recorded | CommandMistake
