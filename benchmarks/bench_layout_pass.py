"""asv suites: how long each strategy's layout pass takes, and how much memory lowering needs.

``setup_cache`` fills the disk caches (exports and lowering prefixes), so no benchmark process
lowers a model: each loads its model's prefix (``harness.pipeline.model.pipeline``) and every
timed call gets a fresh copy of the partitions, so only the pass itself is timed. A pass that
prices its choices (``ilp-time``) gets the suites' cost table; a strategy this host cannot run
is skipped with its reason.
"""

import strategies
from benchmarks._suites import BENCH_MODELS, suite_costs, warm_caches
from harness.errors import LayoutbenchError
from harness.targets.vulkan.compile.lowering_memory import lowering_peak_bytes
from harness.pipeline.model import pipeline
from harness.targets.vulkan.compile.lowering import run_layout_pass
from harness.targets.vulkan.compile.prefix import vulkan_lowering

STRATEGIES = strategies.list_strategies()


class LayoutPass:
    params = (BENCH_MODELS, STRATEGIES)
    param_names = ("model", "strategy")
    timeout = 1800
    version = "layout-pass-1"
    number = 1  # each call needs a fresh, untagged copy (made by setup, not timed)
    repeat = (3, 10, 20.0)

    def setup_cache(self):
        return warm_caches(BENCH_MODELS)

    def setup(self, _, model, strategy):
        costs = suite_costs()
        reason = strategies.unavailable_reason(strategy, costs)
        if reason is not None:
            raise NotImplementedError(reason)
        strategy_cls = strategies.get_strategy(strategy)
        self.inputs = [prefix.layout_pass_input(strategy_cls, costs)
                       for prefix in vulkan_lowering(pipeline(model)).prefixes]

    def time_layout_pass(self, _, model, strategy):
        for layout_pass, program in self.inputs:
            run_layout_pass(layout_pass, program)


class Lowering:
    """Peak memory of lowering each model with the pinned pass (a new process: its export,
    to_edge, partitioning, preprocess); strategies change only the layout pass, small next to
    ExecuTorch's prefix passes. Measured once per lowering identity
    (``harness.targets.vulkan.compile.lowering_memory``): a commit changing no lowering code
    reads it."""

    params = (BENCH_MODELS,)
    param_names = ("model",)
    timeout = 1800
    version = "lowering-2"

    def setup_cache(self):
        peaks = {}
        for model in BENCH_MODELS:
            try:
                peaks[model] = lowering_peak_bytes(model)
            except LayoutbenchError as error:  # that model is skipped with the reason, not the suite
                peaks[model] = str(error)
        return peaks

    def setup(self, peaks, model):
        if isinstance(peaks[model], str):
            raise NotImplementedError(peaks[model])

    def track_peak_memory(self, peaks, model):
        return peaks[model]

    track_peak_memory.unit = "bytes"
