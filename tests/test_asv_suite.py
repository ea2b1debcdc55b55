"""The asv suite runs its sweep once and reads every track_ value from it."""

import pytest

from benchmarks import bench_vulkan_layout as suite


def test_suite_tracks_recorded_metrics(monkeypatch):
    monkeypatch.setattr(suite, "BENCH_MODELS", ["synthetic_small"])
    monkeypatch.setattr(suite, "STRATEGIES", ["bfs-downstream", "tests.user_strategies:IgnoresOperatorRules"])
    bench = suite.VulkanLayout()
    records = bench.setup_cache()
    bench.setup(records, "synthetic_small", "bfs-downstream")
    assert bench.track_transitions(records, "synthetic_small", "bfs-downstream") == records[
        ("synthetic_small", "bfs-downstream")
    ]["transitions"] > 0
    assert bench.track_delegate_memory_bytes(records, "synthetic_small", "bfs-downstream") > 0
    assert bench.track_transition_bytes.unit == "bytes"
    with pytest.raises(NotImplementedError, match="BUFFER/HEIGHT_PACKED"):
        bench.setup(records, "synthetic_small", "tests.user_strategies:IgnoresOperatorRules")


def test_ilp_scaling_suite_measures_formulation_and_optimality(monkeypatch):
    from benchmarks import bench_ilp

    monkeypatch.setattr(bench_ilp, "GRAPHS", ("synthetic_small",))
    bench = bench_ilp.IlpScaling()
    problems = bench.setup_cache()
    bench.setup(problems, "synthetic_small", "count")
    bench.time_solve(problems, "synthetic_small", "count")
    assert bench.track_variables(problems, "synthetic_small", "count") > 0
    assert bench.track_constraints(problems, "synthetic_small", "count") > 0
    assert bench.track_proven_optimal(problems, "synthetic_small", "bytes") == 1


def test_pass_time_suite_compares_each_strategy_with_bfs(monkeypatch):
    from benchmarks import bench_layout_pass

    monkeypatch.setattr(bench_layout_pass, "BENCH_MODELS", ["synthetic_small"])
    monkeypatch.setattr(bench_layout_pass, "STRATEGIES", ["bfs-refined"])
    monkeypatch.setattr(bench_layout_pass, "REPEATS", 1)
    bench = bench_layout_pass.LayoutPassTime()
    medians = bench.setup_cache()
    assert set(medians["synthetic_small"]) == {"bfs-downstream", "bfs-refined"}
    assert bench.track_pass_seconds(medians, "synthetic_small", "bfs-refined") > 0
    assert bench.track_pass_time_vs_bfs(medians, "synthetic_small", "bfs-downstream") == 1.0
