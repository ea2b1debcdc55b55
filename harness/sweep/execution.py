"""Where a sweep's jobs run: worker processes on this machine (:mod:`harness.sweep.workers`),
this process, or a Ray cluster (:mod:`harness.sweep.ray_cluster`). Chosen here, so that
imports go one way: a Ray task supervises its model with the local workers, which know
nothing of Ray.
"""

import os
from dataclasses import dataclass

from harness.sweep.ray_cluster import RayWorkers
from harness.sweep.workers import InProcess, LocalWorkers


@dataclass
class Execution:
    """Where a sweep's jobs run: ``workers`` processes on this machine (None: one per core;
    0: in this process, without isolation), or a Ray cluster at ``ray`` (``local`` starts
    one on this machine); ``time_limit`` seconds and ``memory_limit`` bytes per job."""

    workers: int | None = None
    ray: str | None = None
    time_limit: float | None = None
    memory_limit: int | None = None

    def executor(self):
        if self.ray is not None:
            return RayWorkers(self.ray, self.time_limit, self.memory_limit)
        if self.workers == 0:
            return InProcess()
        return LocalWorkers(self.workers or os.cpu_count() or 1, self.time_limit, self.memory_limit)
