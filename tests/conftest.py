"""Shared, session-wide fixtures: each model is exported and lowered to the layout pass once."""

import logging
import warnings

import pytest

warnings.filterwarnings("ignore")
logging.disable(logging.WARNING)

import models  # noqa: E402
from harness.export_cache import export_model  # noqa: E402
from harness.vulkan_lowering import VulkanLowering  # noqa: E402

QUICK_ZOO = models.list_models(zoo="quick")


class LoweringCache:
    """Exported programs and prefixes by model name, computed on first use."""

    def __init__(self):
        self._exported = {}
        self._lowerings = {}

    def exported(self, name: str):
        if name not in self._exported:
            self._exported[name] = export_model(models.create(name))
        return self._exported[name]

    def lowering(self, name: str) -> VulkanLowering:
        if name not in self._lowerings:
            self._lowerings[name] = VulkanLowering.from_exported(self.exported(name))
        return self._lowerings[name]


@pytest.fixture(scope="session")
def lowerings() -> LoweringCache:
    return LoweringCache()
