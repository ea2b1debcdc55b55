"""Which models the asv suites run over: the quick zoo unless ``LAYOUTBENCH_BENCH_ZOO``
names another (e.g. ``full`` for a release comparison; it takes about 15 minutes to lower)."""

import os

import models

BENCH_ZOO = os.environ.get("LAYOUTBENCH_BENCH_ZOO", "quick")
BENCH_MODELS = models.list_models(zoo=BENCH_ZOO)
