"""Sweeps on a Ray cluster: one task per model, records streamed back as they are made.

Each task supervises its model on whichever node Ray placed it, exactly as a local sweep
does (:class:`~harness.sweep.workers.LocalWorkers` with one worker: a crash or a limit
there is a failed record naming the signal or the limit, and the strategies left go on),
and puts every event on a queue the driver reads, so records land in the driver's results
directory as they come, under the same progress bar. A task asks Ray for one CPU and the
memory limit (default 4 GiB) and is never retried: a model that failed would fail again.
The driver ships its own ``layoutkit``, ``harness``, ``models`` and ``strategies`` packages with the tasks
(``py_modules``); the nodes need the pinned stack (``requirements*.txt``) installed. A job
carries its sweep's settings (:class:`~harness.sweep.job.Job`), not the driver's environment:
a node keeps its own PATH, libraries and Python.
"""

import logging

import harness
import layoutkit
import models
import strategies
from harness.sweep.events import Recorded
from harness.sweep.job import Job
from harness.sweep.workers import GIB, POLL_SECONDS, LocalWorkers

DEFAULT_MEMORY = 4 * GIB


def _supervise(job: Job, queue, time_limit, memory_limit) -> None:
    LocalWorkers(1, time_limit, memory_limit).run([job], queue.put)


class RayWorkers:
    """Jobs as Ray tasks on the cluster at ``address`` (``local``: Ray's default, a cluster
    named by ``RAY_ADDRESS`` or else a new one on this machine)."""

    def __init__(self, address: str, time_limit: float | None = None, memory_limit: int | None = None):
        self.address, self.time_limit, self.memory_limit = address, time_limit, memory_limit

    def run(self, jobs: list[Job], handle) -> None:
        import ray
        from ray.util.queue import Queue

        ray.init(address=None if self.address == "local" else self.address, include_dashboard=False,
                 log_to_driver=False, logging_level=logging.WARNING,
                 runtime_env={"py_modules": [layoutkit, harness, models, strategies]})
        running: dict = {}
        try:
            queue = Queue()
            task = ray.remote(num_cpus=1, memory=self.memory_limit or DEFAULT_MEMORY, max_retries=0)(_supervise)
            running.update({task.remote(job, queue, self.time_limit, self.memory_limit): job for job in jobs})
            recorded: set = set()

            def drain() -> None:
                for event in queue.get_nowait_batch(queue.qsize()):
                    if isinstance(event, Recorded):
                        recorded.add((event.record["model"], event.record["strategy"]))
                    handle(event)

            while running:
                ready, _ = ray.wait(list(running), num_returns=len(running), timeout=POLL_SECONDS)
                drain()
                for ref in ready:
                    job = running.pop(ref)
                    try:
                        ray.get(ref)
                    except ray.exceptions.RayError as error:  # the task itself died: node lost, Ray's OOM killer
                        reason = f"Ray task failed: {str(error).strip().splitlines()[0]}"
                        for strategy in job.strategies:
                            if (job.model, strategy) not in recorded:
                                handle(Recorded(job.record(strategy, "failed", reason)))
        finally:
            for ref in running:  # an interrupted sweep leaves nothing running on the cluster
                ray.cancel(ref, force=True)
            ray.shutdown()
