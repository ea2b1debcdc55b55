"""Shared set-up: library chatter off; models are exported and lowered once per session
through ``harness.pipeline.model.pipeline``."""

from harness import quiet

quiet.apply(verbose=False)  # here and in every worker process the tests start

import models  # noqa: E402

QUICK_ZOO = models.list_models(zoo="quick")
