"""Intervals at a named level (costmodel.intervals) and the support (costmodel.support)."""

import math

import numpy as np
import pandas as pd
import pytest

from costmodel.intervals import LEVEL, Bounds, Intervals
from costmodel.support import FEATURES, Support


@pytest.mark.parametrize("level", [0.5, LEVEL, 0.95])
def test_conformal_bounds_hold_at_their_level_on_errors_of_a_known_distribution(level):
    """Residuals of a skewed, biased distribution (a fit 10 % slow, its errors log-normal with
    a heavy right tail): new draws fall inside as often as the level says, within three
    standard errors of a binomial over 20,000 draws and 200 calibration sets."""
    rng = np.random.default_rng(0)
    inside = []
    for _ in range(200):
        held_out = rng.gamma(2.0, 0.1, size=60) - 0.1
        bounds = Bounds.conformal(held_out, level)
        new = rng.gamma(2.0, 0.1, size=100) - 0.1
        inside.append(np.mean((new >= bounds.low) & (new <= bounds.high)))
    band = 3 * math.sqrt(level * (1 - level) / 20_000)
    # Conformal coverage is at least the level, and above it by at most 1 / (n + 1) on average.
    assert level - band <= np.mean(inside) <= level + 1 / 61 + band


def test_bounds_of_few_residuals_are_their_whole_range():
    assert Bounds.conformal([0.2, -0.1, 0.05], 0.9) == Bounds(-0.1, 0.2)
    assert Bounds.conformal([], 0.9) == Bounds(0.0, 0.0)


def test_outside_the_support_an_interval_is_never_tighter_than_the_familys_worst():
    intervals = Intervals.of(programs=[-0.05, 0.0, 0.05] * 10, changes=[0.0] * 30,
                             family_residuals={"conv2d_direct_grouped": [0.1, -1.2, 0.4], "softmax": [0.05]})
    assert intervals.pooled_worst == pytest.approx(1.2)
    low, high = intervals.interval(0.0, {"conv2d_direct_grouped": 1.0})
    assert (low, high) == pytest.approx((math.exp(-1.2), math.exp(1.2)))
    low, high = intervals.interval(2.0, {"never_measured": 1.0})  # the pooled worst
    inside_low, inside_high = intervals.program.of(2.0)
    assert low == pytest.approx(inside_low + math.exp(-1.2)) and high == pytest.approx(inside_high + math.exp(1.2))
    assert Intervals.from_json(intervals.to_json()) == intervals


def _nodes(family: str, works: list[float]) -> pd.DataFrame:
    return pd.DataFrame([{"family": family, **dict.fromkeys(FEATURES, 0.0), "log_work": w} for w in works])


def test_a_node_outside_every_measured_range_is_outside_the_support():
    support = Support.of(pd.concat([_nodes("conv2d_pw", [10.0, 14.0, 20.0]), _nodes("softmax", [12.0])]))
    inside = dict.fromkeys(FEATURES, 0.0) | {"log_work": 15.0}
    assert support.outside("conv2d_pw", inside) is None
    assert support.outside("conv2d_pw", inside | {"log_work": 20.9}) is None  # within the slack
    assert "log_work 25.0 outside the measured 10.0-20.0" in support.outside("conv2d_pw", inside | {"log_work": 25.0})
    assert support.outside("conv2d_direct_grouped", inside) == "conv2d_direct_grouped never measured"
    assert Support.from_json(support.to_json()) == support
    assert support.nodes == {"conv2d_pw": 3, "softmax": 1}
