"""A sweep on a Ray cluster (a local one started by the test) gives the records a local
sweep gives, crashes included, streamed into the driver's results directory."""

import pytest

from harness.sweep.planning import run_sweep
from harness.sweep.execution import Execution
from harness.results.store import RecordStore

FULL_TIER_ONLY = "its one test starts a local Ray cluster (36 s in a clean-clone run)"

pytest.importorskip("ray")

MODELS = ["synthetic_small", "synthetic:12"]
STRATEGIES = ["bfs-downstream", "tests.helpers.user_strategies:Aborts", "all-width-packed"]


def _summary(records):
    return sorted((r["model"], r["strategy"], r["status"], r["transitions"], (r["reason"] or "").split(" in ")[0])
                  for r in records)


@pytest.mark.slow
def test_a_ray_sweep_records_what_a_local_sweep_records(tmp_path):
    local = RecordStore(tmp_path / "local")
    run_sweep(MODELS, STRATEGIES, "vulkan", local, fresh=True, execution=Execution(workers=2))
    on_ray = RecordStore(tmp_path / "ray")
    sweep = run_sweep(MODELS, STRATEGIES, "vulkan", on_ray, fresh=True, execution=Execution(ray="local"))
    assert len(sweep.measured) == len(MODELS) * len(STRATEGIES)
    assert _summary(on_ray.read()) == _summary(local.read())
    statuses = {(r["strategy"], r["status"]) for r in on_ray.read()}
    assert ("tests.helpers.user_strategies:Aborts", "failed") in statuses and ("all-width-packed", "ok") in statuses
