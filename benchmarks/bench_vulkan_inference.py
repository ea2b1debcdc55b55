"""asv suite: each strategy's program run on an ET-VK runtime, the numbers of its vulkan-run record.

``setup_cache`` runs the vulkan-run sweep once, as a per-commit run affords: one runner
process per program, a warm-up and three timed inferences (``LAYOUTBENCH_BENCH_RUN`` sets
more: ``benchmarks._suites``); a commit reuses every record whose identity (the runtime's
digest, the run settings, the strategy's and the measuring code's) an earlier one made. The
``track_`` benchmarks read its records, so asv's value for a (model, strategy) is the record's. The
latency is the median of the runtime's own ``Method::execute`` events in the ETDump, less
the event tracer's logging inside them, not a wall clock around processes
(docs/latency.md); the load time is its ``Method::init``.

Needs a runtime (``LAYOUTBENCH_ET_RUNNER``, an ``executor_runner`` on ``PATH`` or in the
cache, or pybindings with VulkanBackend); without one every record is skipped, and so is
every benchmark, with the reason. A runtime that writes no ETDump (a runner built without
the event tracer) skips the event-timed benchmarks: its latencies, timed from outside,
move by far more between runs than asv's threshold for these (asv.conf.json).
"""

from asv_runner.benchmarks.mark import SkipNotImplemented

from benchmarks._suites import BENCH_MODELS, RecordedSuite, track
from harness.results.schema import ETDUMP
from strategies import list_strategies

STRATEGIES = list_strategies()


def event_timed(name: str):
    """``track(name)``, skipped where the record's latency was not timed by the runtime's events."""
    read = track(name)

    def benchmark(self, records, *params):
        if self.record["latency_source"] != ETDUMP:
            raise SkipNotImplemented("the runtime wrote no ETDump: build executor_runner with "
                                     "-DEXECUTORCH_ENABLE_EVENT_TRACER=ON")
        return read(self, records, *params)

    benchmark.unit, benchmark.__doc__ = read.unit, read.__doc__
    return benchmark


class VulkanInference(RecordedSuite):
    params = (BENCH_MODELS, STRATEGIES)
    param_names = ("model", "strategy")
    target = "vulkan-run"
    # 3: one runner process per program, as a commit affords, no longer the fastest of three.
    version = "vulkan-inference-3"

    def setup_cache(self):
        return self.sweep()

    track_latency_ms = event_timed("latency_ms_median")
    track_load_ms = event_timed("load_ms")
    track_gpu_dispatch_ms = event_timed("gpu_dispatch_ms")
    track_peak_rss_bytes = track("peak_rss_bytes")
