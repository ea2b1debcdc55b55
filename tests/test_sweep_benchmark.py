"""A sweep shares one lowering prefix across strategies; measured against re-lowering.

Run with ``pytest tests/test_sweep_benchmark.py --benchmark-enable`` for timings; by
default each runs once as a test, checking that sharing changes no byte of any payload.
"""

import pytest

import strategies
from harness.targets.vulkan.lowering import VulkanLowering, payload_digest
from harness.pipeline.model import pipeline

MODEL = "resnet18"


def _classes():
    return [strategies.get_strategy(name) for name in strategies.list_strategies()]


def _payloads(lowered):
    return [p.result.processed_bytes for p in lowered.partitions]


@pytest.fixture(scope="module")
def exported():
    return pipeline(MODEL).exported


def test_sweep_with_shared_prefix(benchmark, exported):
    def sweep():
        lowering = VulkanLowering.from_exported(exported)
        return [_payloads(lowering.lower(cls)) for cls in _classes()]

    shared = benchmark.pedantic(sweep, rounds=1, iterations=1)
    separate = [_payloads(VulkanLowering.from_exported(exported, cls).lower(cls)) for cls in _classes()]
    assert shared == separate


def test_sweep_relowering_per_strategy(benchmark, exported):
    def sweep():
        return [
            [p.reference_digest for p in VulkanLowering.from_exported(exported, cls).prefixes]
            for cls in _classes()
        ]

    relowered = benchmark.pedantic(sweep, rounds=1, iterations=1)
    lowering = VulkanLowering.from_exported(exported)
    assert relowered == [[payload_digest(p) for p in _payloads(lowering.lower(cls))] for cls in _classes()]
