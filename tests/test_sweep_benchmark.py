"""A sweep shares one lowering prefix across strategies; measured against re-lowering.

Run with ``pytest tests/test_sweep_benchmark.py --benchmark-enable`` for timings (the shared
sweep benchmarked, re-lowering per strategy timed once beside it, their ratio in the
benchmark's ``extra_info``); by default it runs once as a test, checking that sharing changes
no byte of any payload.
"""

import time

import pytest

import strategies
from harness.targets.vulkan.compile.lowering import VulkanLowering, payload_digest
from harness.pipeline.model import pipeline
from tests.helpers.tables import TRANSITIONS_ONLY

FULL_TIER_ONLY = "its one test lowers resnet18 once per strategy beside the shared prefix (89 s)"

MODEL = "resnet18"


def _payloads(lowered):
    return [p.result.processed_bytes for p in lowered.partitions]


@pytest.mark.slow
def test_sweep_with_shared_prefix_against_relowering_per_strategy(benchmark):
    """Each strategy from the shared prefix gives the payloads of a lowering with that strategy
    throughout: those its own prefix finishes with, and those the lowering itself serialized."""
    exported = pipeline(MODEL).exported
    classes = [strategies.get_strategy(name) for name in strategies.list_strategies()]

    def sweep():
        lowering = VulkanLowering.from_exported(exported)
        return [_payloads(lowering.lower(cls, TRANSITIONS_ONLY)) for cls in classes]

    shared = benchmark.pedantic(sweep, rounds=1, iterations=1)
    start = time.perf_counter()
    relowered = [VulkanLowering.from_exported(exported, cls, costs=TRANSITIONS_ONLY) for cls in classes]
    benchmark.extra_info["relowering_seconds"] = time.perf_counter() - start
    if benchmark.stats:  # timed (--benchmark-enable): re-lowering against sharing, in one run
        benchmark.extra_info["relowering_over_shared"] = (benchmark.extra_info["relowering_seconds"]
                                                          / benchmark.stats.stats.median)
    assert shared == [_payloads(lowering.lower(cls, TRANSITIONS_ONLY)) for lowering, cls in zip(relowered, classes)]
    assert [[p.reference_digest for p in lowering.prefixes] for lowering in relowered] == \
        [[payload_digest(p) for p in payloads] for payloads in shared]
