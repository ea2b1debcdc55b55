"""asv suite: how long each strategy's layout pass takes, absolutely and against the pinned pass.

``setup_cache`` lowers each model to the layout pass once and replays every strategy's
pass ``REPEATS`` times, interleaved, keeping the median; the ``track_`` benchmarks read
those medians. (A ``time_`` benchmark would time the copy of the lowered program that
each replay needs, which dwarfs the pass on small models.)
"""

import statistics

import models
import strategies
from benchmarks._zoo import BENCH_MODELS
from harness.export_cache import export_model
from harness.vulkan_lowering import VulkanLowering

STRATEGIES = strategies.list_strategies()
REFERENCE = "bfs-downstream"
REPEATS = 5


def median_pass_seconds(model: str, strategy_names: list[str], repeats: int) -> dict:
    """Median layout-pass seconds per strategy on one model (all partitions summed)."""
    lowering = VulkanLowering.from_exported(export_model(models.create(model)))
    samples: dict = {name: [] for name in strategy_names}
    for _ in range(repeats):
        for name in strategy_names:
            samples[name].append(lowering.lower(strategies.get_strategy(name)).pass_seconds)
    return {name: statistics.median(values) for name, values in samples.items()}


class LayoutPassTime:
    params = (BENCH_MODELS, STRATEGIES)
    param_names = ("model", "strategy")
    timeout = 3600
    version = "layout-pass-time-1"

    def setup_cache(self):
        names = sorted(set(STRATEGIES) | {REFERENCE})
        return {model: median_pass_seconds(model, names, REPEATS) for model in BENCH_MODELS}

    def track_pass_seconds(self, medians, model, strategy):
        return medians[model][strategy]

    track_pass_seconds.unit = "seconds"

    def track_pass_time_vs_bfs(self, medians, model, strategy):
        return medians[model][strategy] / medians[model][REFERENCE]

    track_pass_time_vs_bfs.unit = "x bfs-downstream"
