"""Shared set-up: library chatter off; models are exported and lowered once per session
through ``harness.pipeline.model.pipeline``; a cost table in force, so that every strategy,
ilp-time included, lowers wherever the tests lower them all."""

import json
import os
import tempfile

from harness import quiet

quiet.apply(verbose=False)  # here and in every worker process the tests start
# The commands the tests start run here, not in a developer's warm server (tests/test_warm_server.py starts its own).
os.environ["LAYOUTBENCH_NO_SERVER"] = "1"

import models  # noqa: E402
from strategies.gpu_costs import COSTS_ENV, CostTable, LinearCost  # noqa: E402

QUICK_ZOO = models.list_models(zoo="quick")

# Transitions priced alike, operators not at all: ilp-time then solves as quickly as ilp on
# every model. Tests of time itself (tests/test_gpu_time.py) put their own tables in force.
TRANSITIONS_ONLY = CostTable("transitions only", pooled_transition=LinearCost(0.005, 0.01))
_table = os.path.join(tempfile.mkdtemp(prefix="layoutbench-costs-"), "transitions-only.json")
with open(_table, "w") as _file:
    json.dump(TRANSITIONS_ONLY.to_json(), _file)
os.environ[COSTS_ENV] = _table
