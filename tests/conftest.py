"""Shared set-up: library chatter off; models are exported and lowered once per session
through ``harness.pipeline.model.pipeline``."""

import logging
import warnings

warnings.filterwarnings("ignore")
logging.disable(logging.WARNING)

import models  # noqa: E402

QUICK_ZOO = models.list_models(zoo="quick")
