"""asv suite: what each strategy does on the benchmark zoo (quick by default), lowered for ET-VK.

``setup_cache`` runs the whole sweep once (each model lowered to the layout pass once,
shared by all strategies); the ``track_`` benchmarks only read its records.
"""

import tempfile

import strategies
from benchmarks._zoo import BENCH_MODELS, RecordedSuite
from harness.records import RecordStore
from harness.sweep import run_sweep

STRATEGIES = strategies.list_strategies()


class VulkanLayout(RecordedSuite):
    params = (BENCH_MODELS, STRATEGIES)
    param_names = ("model", "strategy")
    timeout = 3600
    version = "vulkan-layout-1"

    def setup_cache(self):
        with tempfile.TemporaryDirectory() as results:
            records = run_sweep(BENCH_MODELS, STRATEGIES, "vulkan", RecordStore(results), fresh=True)
        return {(r["model"], r["strategy"]): r for r in records}

    def track_transitions(self, records, model, strategy):
        return self.record["transitions"]

    track_transitions.unit = "transitions"

    def track_transition_bytes(self, records, model, strategy):
        return self.record["transition_bytes"]

    track_transition_bytes.unit = "bytes"

    def track_delegate_memory_bytes(self, records, model, strategy):
        return self.record["delegate_memory_bytes"]

    track_delegate_memory_bytes.unit = "bytes"
