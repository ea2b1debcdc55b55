"""asv suite: what each strategy does on the benchmark zoo (quick by default), lowered for ET-VK.

``setup_cache`` runs the whole sweep once (each model lowered to the layout pass once,
shared by all strategies); the ``track_`` benchmarks only read its records.
"""

import strategies
from benchmarks._suites import BENCH_MODELS, RecordedSuite, track

STRATEGIES = strategies.list_strategies()


class VulkanLayout(RecordedSuite):
    params = (BENCH_MODELS, STRATEGIES)
    param_names = ("model", "strategy")
    target = "vulkan"
    version = "vulkan-layout-2"

    def setup_cache(self):
        return self.sweep()

    track_transitions = track("transitions")
    track_transition_bytes = track("transition_bytes")
    track_delegate_memory_bytes = track("delegate_memory_bytes")
    track_predicted_gpu_ms = track("predicted_gpu_ms")
