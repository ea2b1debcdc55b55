"""The asv suite runs its sweep once and reads every track_ value from it."""

import os
from pathlib import Path

import pytest

from benchmarks import bench_vulkan_layout as suite

from .helpers.caches import with_shared_entries


def test_every_suite_has_a_setup_cache_of_its_own():
    """asv keys a setup cache by the file and line defining it: suites sharing one (an
    inherited method) would get each other's records."""
    import importlib
    import inspect
    import pkgutil

    import benchmarks
    from asv_runner.benchmarks._base import get_setup_cache_key

    suites = [cls for info in pkgutil.iter_modules(benchmarks.__path__) if info.name.startswith("bench_")
              for _, cls in inspect.getmembers(importlib.import_module(f"benchmarks.{info.name}"), inspect.isclass)
              if cls.__module__ == f"benchmarks.{info.name}" and hasattr(cls, "setup_cache")]
    keys = [get_setup_cache_key(cls.setup_cache) for cls in suites]
    assert len(suites) >= 5 and len(set(keys)) == len(keys), dict(zip([s.__name__ for s in suites], keys))


def test_suite_tracks_recorded_metrics(monkeypatch):
    monkeypatch.setattr(suite.VulkanLayout, "params",
                        (["synthetic_small"], ["bfs-downstream", "tests.helpers.user_strategies:IgnoresOperatorRules"]))
    bench = suite.VulkanLayout()
    records = bench.setup_cache()
    bench.setup(records, "synthetic_small", "bfs-downstream")
    assert bench.track_transitions(records, "synthetic_small", "bfs-downstream") == records[
        ("synthetic_small", "bfs-downstream")
    ]["transitions"] > 0
    assert bench.track_delegate_memory_bytes(records, "synthetic_small", "bfs-downstream") > 0
    assert bench.track_transition_bytes.unit == "bytes" and bench.track_transitions.unit == "count"
    with pytest.raises(NotImplementedError, match="BUFFER/HEIGHT_PACKED"):
        bench.setup(records, "synthetic_small", "tests.helpers.user_strategies:IgnoresOperatorRules")


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


def test_layout_pass_suite_times_the_real_pass_on_a_fresh_copy(monkeypatch):
    from benchmarks import bench_layout_pass

    monkeypatch.setattr(bench_layout_pass, "BENCH_MODELS", ["synthetic_small"])
    bench = bench_layout_pass.LayoutPass()
    cache = bench.setup_cache()
    for _ in range(2):  # asv re-runs setup before every timed call
        bench.setup(cache, "synthetic_small", "bfs-downstream")
        bench.time_layout_pass(cache, "synthetic_small", "bfs-downstream")
        clones = [
            node for _, program in bench.inputs for node in program.graph.nodes
            if node.op == "call_function" and "clone" in str(node.target)
        ]
        assert len(clones) == 9  # what the pinned pass inserts on synthetic_small, once per copy


@pytest.mark.slow
def test_lowering_memory_is_measured_once_per_lowering_identity(monkeypatch, tmp_path):
    from benchmarks import bench_layout_pass
    from harness.targets.vulkan.compile import lowering_memory

    monkeypatch.setattr(bench_layout_pass, "BENCH_MODELS", ["synthetic_small", "tests.helpers.user_models:data_dependent"])
    monkeypatch.setenv("LAYOUTBENCH_CACHE_DIR", str(with_shared_entries(tmp_path / "cache")))
    bench = bench_layout_pass.Lowering()
    peaks = bench.setup_cache()
    bench.setup(peaks, "synthetic_small")
    # a new process with torch, ExecuTorch and a lowering: hundreds of MiB, far from a GiB's tens
    assert 200 << 20 < bench.track_peak_memory(peaks, "synthetic_small") < 8 << 30
    with pytest.raises(NotImplementedError, match="failed to export"):
        bench.setup(peaks, "tests.helpers.user_models:data_dependent")
    monkeypatch.setattr(bench_layout_pass, "BENCH_MODELS", ["synthetic_small"])
    monkeypatch.setattr(lowering_memory, "_lower_in_new_process", lambda name: pytest.fail("measured again"))
    assert bench.setup_cache() == {"synthetic_small": peaks["synthetic_small"]}


ARM_MODEL = "synthetic:5"


def test_arm_suite_tracks_transposes_and_vela_cycles(monkeypatch):
    from benchmarks import bench_arm

    # Five operators: Ethos-U lowering takes seconds on them, a minute on synthetic_small's forty.
    monkeypatch.setattr(bench_arm.ArmTargets, "params", ([ARM_MODEL], bench_arm.ARM_TARGETS))
    bench = bench_arm.ArmTargets()
    records = bench.setup_cache()
    assert set(records) == {(ARM_MODEL, target) for target in bench_arm.ARM_TARGETS}
    for target in bench_arm.ARM_TARGETS:
        bench.setup(records, ARM_MODEL, target)
        assert bench.track_transposes(records, ARM_MODEL, target) == records[(ARM_MODEL, target)]["transposes"]
    bench.setup(records, ARM_MODEL, "ethos-u85-256")
    assert bench.track_vela_cycles(records, ARM_MODEL, "ethos-u85-256") > 0
    assert 0 <= bench.track_transpose_cycle_share(records, ARM_MODEL, "ethos-u85-256") <= 1
    # Vela has nothing to say about the other targets: asv skips those pairs before setup, and
    # every pair it runs has a value.
    skipped_targets = {target for _, target in bench_arm.ArmTargets.track_vela_cycles.skip_params}
    assert skipped_targets == {"tosa", "vgf"}
    for target in set(bench_arm.ARM_TARGETS) - skipped_targets:
        assert records[(ARM_MODEL, target)]["cycles"] is not None


def test_suite_tracks_predicted_gpu_time_under_the_h100_table_by_default(monkeypatch):
    from benchmarks._suites import DEFAULT_COSTS
    from costmodel.table import COSTS_ENV, load

    monkeypatch.delenv(COSTS_ENV)
    monkeypatch.setattr(suite.VulkanLayout, "params", (["synthetic_small"], ["bfs-downstream", "ilp-time"]))
    bench = suite.VulkanLayout()
    records = bench.setup_cache()
    table = load(DEFAULT_COSTS)
    assert DEFAULT_COSTS.name == "h100.json" and "H100" in table.device
    for strategy in ("bfs-downstream", "ilp-time"):
        record = records[("synthetic_small", strategy)]
        bench.setup(records, "synthetic_small", strategy)
        assert record["environment"]["gpu_costs"] == table.name
        assert bench.track_predicted_gpu_ms(records, "synthetic_small", strategy) == record["predicted_gpu_ms"] > 0
    assert records[("synthetic_small", "ilp-time")]["predicted_gpu_ms"] < records[
        ("synthetic_small", "bfs-downstream")]["predicted_gpu_ms"]
    assert bench.track_predicted_gpu_ms.unit == "ms"


def test_layout_pass_times_ilp_time_under_the_suites_cost_table(monkeypatch):
    """ilp-time's pass is constructed with the suite's table (the one VulkanLayout prices with),
    so it is timed like every other strategy's."""
    from benchmarks import bench_layout_pass
    from benchmarks._suites import DEFAULT_COSTS
    from costmodel.table import COSTS_ENV, load

    monkeypatch.delenv(COSTS_ENV)
    monkeypatch.setattr(bench_layout_pass, "BENCH_MODELS", ["synthetic_small"])
    bench = bench_layout_pass.LayoutPass()
    cache = bench.setup_cache()
    bench.setup(cache, "synthetic_small", "ilp-time")
    bench.time_layout_pass(cache, "synthetic_small", "ilp-time")
    assert {layout_pass.costs.name for layout_pass, _ in bench.inputs} == {load(DEFAULT_COSTS).name}
    assert all(layout_pass.solution.optimal for layout_pass, _ in bench.inputs)


def test_layout_pass_skips_a_strategy_this_host_cannot_run_with_its_reason(monkeypatch):
    from benchmarks import bench_layout_pass
    from costmodel.table import COSTS_ENV

    monkeypatch.delenv(COSTS_ENV)
    bench = bench_layout_pass.LayoutPass()
    with pytest.raises(NotImplementedError, match="needs the frobnicator"):
        bench.setup(["synthetic_small"], "synthetic_small", "tests.helpers.user_strategies:NeedsAMissingTool")


@pytest.mark.slow
def test_the_suites_leave_the_libraries_chatter_out_of_asvs_output():
    """A benchmark process as asv starts one (the package imported first, no quiet environment
    inherited) prints nothing: ExecuTorch logged an INFO line per inserted transition."""
    import subprocess
    import sys

    from harness import quiet

    benchmark = ("from benchmarks import bench_layout_pass as suite\n"
                 "suite.BENCH_MODELS = ['synthetic_small']\n"
                 "bench = suite.LayoutPass()\n"
                 "cache = bench.setup_cache()\n"
                 "bench.setup(cache, 'synthetic_small', 'bfs-downstream')\n"
                 "bench.time_layout_pass(cache, 'synthetic_small', 'bfs-downstream')\n")
    inherited = (quiet.QUIET_ENV, "PYTHONWARNINGS", "TORCH_CPP_LOG_LEVEL")
    environment = {name: value for name, value in os.environ.items() if name not in inherited}
    run = subprocess.run([sys.executable, "-c", benchmark], cwd=Path(suite.__file__).parents[1], env=environment,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0 and run.stderr == "" and run.stdout == "", run.stderr[-3000:]


def test_run_settings_for_programs_are_a_commits_unless_set():
    from benchmarks._suites import BENCH_RUN_ENV, run_settings
    from harness.targets import RunSettings

    assert run_settings("") == RunSettings(processes=1, iterations=3)
    assert run_settings("processes=3, iterations=10") == RunSettings(processes=3, iterations=10)
    assert run_settings("warmup=0").warmup == 0
    for wrong in ("processes=0", "iterations=many", "repeat=3", "processes"):
        with pytest.raises(ValueError, match=f"{BENCH_RUN_ENV}: '{wrong}' is not one of iterations, processes"):
            run_settings(wrong)


@pytest.fixture
def real_runtime():
    from harness.targets.vulkan.local import runners

    if runners.find_runtime(None, os.environ.get(runners.RUNNER_ENV)) is None:
        pytest.skip(f"this test runs programs: {runners.NO_RUNTIME_REASON}")


def test_inference_suite_runs_programs_as_a_commit_affords_and_reuses_them(real_runtime, monkeypatch):
    """One runtime process per program, three timed inferences; the next commit (another
    set-up) reuses every record whose identity holds, with its program and ETDump."""
    from benchmarks import bench_vulkan_inference

    monkeypatch.setattr(bench_vulkan_inference.VulkanInference, "params", (["synthetic_small"], ["bfs-downstream"]))
    first = bench_vulkan_inference.VulkanInference().setup_cache()[("synthetic_small", "bfs-downstream")]
    assert first["status"] == "ok", first["reason"]
    assert first["iterations"] == 3 and first["environment"]["run_settings"]["processes"] == 1
    bench = bench_vulkan_inference.VulkanInference()
    records = bench.setup_cache()
    assert records[("synthetic_small", "bfs-downstream")] == first
    bench.setup(records, "synthetic_small", "bfs-downstream")
    assert bench.track_latency_ms(records, "synthetic_small", "bfs-downstream") == first["latency_ms_median"] > 0
