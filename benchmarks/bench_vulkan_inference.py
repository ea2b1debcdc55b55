"""asv suite: each strategy's program run on an ET-VK runtime, the numbers of its vulkan-run record.

``setup_cache`` runs the vulkan-run sweep once, as a per-commit run affords (``benchmarks._suites``'
run settings), reusing every record whose identity (the runtime's digest, the run settings, the
strategy's and the measuring code's) an earlier commit made; the ``track_`` benchmarks read its
records. The latency is the median of the runtime's own ``Method::execute`` events in the
ETDump, less the event tracer's logging inside them, not a wall clock around processes
(docs/latency.md); the load time is its ``Method::init``.

Needs a runtime (``LAYOUTBENCH_ET_RUNNER``, an ``executor_runner`` on ``PATH`` or in the cache,
or pybindings with VulkanBackend); without one every benchmark is skipped with the reason. A
runtime that writes no ETDump skips the event-timed benchmarks: latencies timed from outside
move by far more between runs than asv's threshold for these (asv.conf.json).
"""

from benchmarks._suites import BENCH_MODELS, RecordedSuite, track
from strategies import list_strategies

STRATEGIES = list_strategies()


class VulkanInference(RecordedSuite):
    params = (BENCH_MODELS, STRATEGIES)
    param_names = ("model", "strategy")
    target = "vulkan-run"
    # 3: one runner process per program, as a commit affords, no longer the fastest of three.
    version = "vulkan-inference-3"

    def setup_cache(self):
        return self.sweep()

    track_latency_ms = track("latency_ms_median", event_timed=True)
    track_load_ms = track("load_ms", event_timed=True)
    track_gpu_dispatch_ms = track("gpu_dispatch_ms", event_timed=True)
    track_peak_rss_bytes = track("peak_rss_bytes")
