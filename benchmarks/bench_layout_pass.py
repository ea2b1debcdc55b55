"""asv suites: how long each strategy's layout pass takes, and how much memory lowering needs.

``setup_cache`` fills the disk caches (exports and lowering prefixes); each benchmark
process then loads its model's prefix from there (``harness.pipeline.model.pipeline``)
and every timed call gets a fresh copy of the partitions, so only the pass itself is timed.
"""

import strategies
from benchmarks._zoo import BENCH_MODELS, warm_caches
from harness.pipeline.model import pipeline
from harness.targets.vulkan.lowering import VulkanLowering, run_layout_pass

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
        strategy_cls = strategies.get_strategy(strategy)
        self.inputs = [prefix.layout_pass_input(strategy_cls) for prefix in pipeline(model).vulkan_lowering.prefixes]

    def time_layout_pass(self, _, model, strategy):
        for layout_pass, program in self.inputs:
            run_layout_pass(layout_pass, program)


class Lowering:
    """Peak memory of export-to-delegate lowering with the pinned pass; strategies change
    only the layout pass, whose memory is small next to ExecuTorch's prefix passes."""

    params = (BENCH_MODELS,)
    param_names = ("model",)
    timeout = 1800
    version = "lowering-1"

    def setup_cache(self):
        return warm_caches(BENCH_MODELS)

    def setup(self, _, model):
        self.exported = pipeline(model).exported

    def peakmem_lowering(self, _, model):
        VulkanLowering.from_exported(self.exported)
