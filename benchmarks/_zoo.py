"""Which models the asv suites run over, and the lowering each benchmark process shares
between its parameters' set-ups.

The quick zoo unless ``LAYOUTBENCH_BENCH_ZOO`` names another (``full`` for a release
comparison; it takes about 15 minutes to lower) or ``LAYOUTBENCH_BENCH_MODELS`` lists
models (comma-separated, any name ``layoutbench list models`` accepts).
"""

import functools
import os

import models
from harness.export_cache import export_model
from harness.vulkan_lowering import VulkanLowering

BENCH_ZOO = os.environ.get("LAYOUTBENCH_BENCH_ZOO", "quick")
_LISTED = os.environ.get("LAYOUTBENCH_BENCH_MODELS")
BENCH_MODELS = models.resolve_models(_LISTED) if _LISTED else models.resolve_models(zoo=BENCH_ZOO)


def warm_export_cache(model_names: list[str]) -> list[str]:
    """Export every model once (asv ``setup_cache``), so benchmark processes only load them.

    Returns the names: a ``setup_cache`` returning None would not be passed on by asv,
    changing the benchmarks' signatures."""
    for name in model_names:
        export_model(models.create(name))
    return list(model_names)


@functools.cache
def lowering(model: str) -> VulkanLowering:
    """The model lowered to the layout pass, once per process: it does not pickle, so it
    cannot come from ``setup_cache``."""
    return VulkanLowering.from_exported(export_model(models.create(model)))


class RecordedSuite:
    """Base of suites whose ``track_`` benchmarks read the record ``setup_cache`` made for
    their parameters; a record that is not ok skips them with its reason."""

    def setup(self, records, *params):
        self.record = records[params]
        if self.record["status"] != "ok":
            raise NotImplementedError(self.record["reason"])
