"""What an ET-VK run's ETDump says: GPU time attributed by node (node maps, profile tables,
the cost table), and the runtime's own per-inference latency and load time.

``tests/data/etvk/`` holds two real ETDumps of synthetic_small (bfs-downstream and
all-width-packed) and one of synthetic_partitioned (bfs-downstream: three Vulkan partitions,
a CPU operator between two), written by an ET-VK executor_runner on Mesa's lavapipe with
three inferences each, and the node maps vulkan-run wrote beside them.
"""

import json
import shutil
import statistics
import tarfile
from pathlib import Path

import pandas as pd
import pytest
from executorch.devtools.etdump.serialize import deserialize_from_etdump_flatcc

from costmodel.measurements import read_measurements, write_measurements
from costmodel.table import load as load_table
from harness.inspection import costs, profile
from harness.pipeline.model import pipeline
from harness.results.results_dir import ResultsDir
from harness.results.store import RecordStore, make_record
from harness.targets.vulkan.compile import metrics
from harness.targets.vulkan.local import latency
from harness.targets.vulkan.local.dispatches import (
    STAGING,
    STAGING_KERNELS,
    attributed_gpu_fields,
    gpu_summary,
    node_map,
    read_dispatches,
)
from harness.targets.vulkan.compile.prefix import vulkan_lowering
from harness.targets.vulkan.local.measured_nodes import load_measurements
from harness.targets.vulkan.local.remote_import import import_remote
from harness.targets.vulkan.remote.remote_archive import MADE_BY
from layoutkit.errors import UsageError
import strategies
from tests.helpers.tables import TRANSITIONS_ONLY

DATA = Path(__file__).parent / "data" / "etvk"
RECORDED = ("bfs-downstream", "all-width-packed")
LAVAPIPE_LIMITS = {"maxImageDimension2D": 16384, "maxImageDimension3D": 4096, "maxStorageBufferRange": 134217728}
PARTITIONED = "partitioned-bfs-downstream"  # synthetic_partitioned's program


def recorded(strategy: str) -> pd.DataFrame:
    return read_dispatches(DATA / f"{strategy}.etdump", json.loads((DATA / f"{strategy}.nodes.json").read_text()))


@pytest.mark.slow
def test_the_node_map_of_the_recorded_partitioned_program_is_what_lowering_gives_today():
    lowered = vulkan_lowering(pipeline("synthetic_partitioned")).lower(strategies.get_strategy("bfs-downstream"))
    assert node_map(lowered) == json.loads((DATA / f"{PARTITIONED}.nodes.json").read_text())


def test_the_dispatches_of_each_partition_are_its_nodes_and_copies():
    """ET-VK names a dispatch with the operator last built in its process, so the copies of a
    partition's inputs carry the previous partition's last operator and its output copy its
    own last operator: those are copies, and every operator node is its own partition's."""
    nodes = json.loads((DATA / f"{PARTITIONED}.nodes.json").read_text())["partitions"]
    frame = recorded(PARTITIONED)
    assert len(nodes) == 3 and sorted(frame["partition"].unique()) == [p["partition"] for p in nodes]
    staging = frame[frame["operator"] == STAGING]
    assert staging["kernel"].str.startswith(STAGING_KERNELS).all()
    assert staging.groupby("partition").size().tolist() == [2, 2, 2]  # one input and one output each
    operators = frame[frame["operator"] != STAGING]
    assert not operators["kernel"].str.startswith(STAGING_KERNELS).any()
    for partition in nodes:
        ran = operators[operators["partition"] == partition["partition"]]
        expected = {i for i, node in enumerate(partition["nodes"]) if node["operator"] != "et_vk.prepack.default"}
        assert set(ran["node_id"]) == expected
        assert (ran["operator"] == [partition["nodes"][i]["operator"] for i in ran["node_id"].astype(int)]).all()
    assert frame["transition"].sum() == 7


def test_the_output_copy_of_a_one_partition_program_is_no_node_s():
    frame = recorded("bfs-downstream")
    staging = frame[frame["operator"] == STAGING]
    assert staging["kernel"].str.startswith("image_to_nchw").sum() == len(staging) - 1 > 0


def test_dispatches_that_cannot_be_attributed_leave_the_gpu_time_unknown_and_say_why():
    fields = attributed_gpu_fields(DATA / "bfs-downstream.etdump",
                                   json.loads((DATA / f"{PARTITIONED}.nodes.json").read_text()))
    assert fields["gpu_dispatch_ms"] is None and fields["staging_gpu_ms"] is None
    assert "is it this program's ETDump?" in fields["attribution_error"]
    assert attributed_gpu_fields(DATA / "bfs-downstream.etdump",
                                 json.loads((DATA / "bfs-downstream.nodes.json").read_text()))["attribution_error"] is None


@pytest.mark.parametrize("strategy", strategies.list_strategies())
def test_node_map_marks_exactly_the_transitions(strategy):
    lowered = vulkan_lowering(pipeline("synthetic_small")).lower(strategies.get_strategy(strategy), TRANSITIONS_ONLY)
    nodes = node_map(lowered)
    transitions = [n["node"] for p in nodes["partitions"] for n in p["nodes"] if n["transition"]]
    assert sorted(transitions) == sorted(t.node for t in metrics.transitions(lowered))
    for partition in nodes["partitions"]:
        for node in partition["nodes"]:
            assert node["output"] is None or "/" in node["output"]
            if node["transition"]:
                assert node["operator"] == "aten.clone.default" and node["inputs"][0] != node["output"]


@pytest.mark.parametrize("strategy", RECORDED)
def test_the_node_map_of_the_recorded_programs_is_what_lowering_gives_today(strategy):
    """The recorded ETDumps stay meaningful only while the same lowering gives the same nodes."""
    lowered = vulkan_lowering(pipeline("synthetic_small")).lower(strategies.get_strategy(strategy), TRANSITIONS_ONLY)
    assert node_map(lowered) == json.loads((DATA / f"{strategy}.nodes.json").read_text())


def test_transition_share_matches_a_count_by_hand():
    """The ETDump read without the Inspector: every dispatch event's JSON name, its node id
    checked against the node map's transitions; each dispatch's median over the three
    inferences, summed."""
    etdump = deserialize_from_etdump_flatcc((DATA / "bfs-downstream.etdump").read_bytes())
    nodes = json.loads((DATA / "bfs-downstream.nodes.json").read_text())["partitions"][0]["nodes"]
    transition_ids = {i for i, node in enumerate(nodes) if node["transition"]}
    times: dict[str, list[float]] = {}
    clone_dispatches = 0
    runs = [run for run in etdump.run_data if run.name == "Execute"]
    for run in runs:
        for event in run.events:
            name = event.profile_event.delegate_debug_id_str if event.profile_event else None
            if not name or "kernel_name" not in name:
                continue
            dispatch = json.loads(name)
            times.setdefault(name, []).append((event.profile_event.end_time - event.profile_event.start_time) / 1e6)
            operator = dispatch.get("operator", {})
            if operator.get("name") == "aten.clone.default" and operator["delegate_node_id"] in transition_ids:
                clone_dispatches += 1
    assert len(runs) == 3 and clone_dispatches == 9 * 3  # 9 transitions, one dispatch each, per inference
    medians = {name: pd.Series(t).median() for name, t in times.items()}
    by_hand = sum(m for name, m in medians.items()
                  if json.loads(name).get("operator", {}).get("delegate_node_id") in transition_ids)
    summary = gpu_summary(recorded("bfs-downstream"))
    assert summary["transition_gpu_ms"] == pytest.approx(by_hand)
    assert summary["gpu_dispatch_ms"] == pytest.approx(sum(medians.values()))
    assert 0 < summary["transition_time_share"] < 1


def test_dispatches_carry_their_node_and_representations():
    frame = recorded("all-width-packed")
    operators = frame[frame["operator"] != STAGING]
    assert (operators["node_id"] >= 0).all() and operators["node"].str.len().gt(0).all()
    assert set(frame.loc[frame["operator"] == STAGING, "kernel"].str.contains("nchw")) == {True}
    transitions = frame[frame["transition"]]
    assert transitions["node"].nunique() == 13
    assert (transitions["inputs"] != transitions["output"]).all()


def test_an_etdump_of_another_program_is_refused():
    with pytest.raises(ValueError, match="is it this program's ETDump"):
        read_dispatches(DATA / "bfs-downstream.etdump",
                        json.loads((DATA / "all-width-packed.nodes.json").read_text()))


def test_profile_tables_add_up():
    frame = recorded("bfs-downstream")
    operators = profile.by_operator(frame)
    assert operators["share"].sum() == pytest.approx(1.0)
    assert operators.set_index("operator").loc[profile.TRANSITION, "gpu_ms"] == pytest.approx(
        gpu_summary(frame)["transition_gpu_ms"])
    representations = profile.by_representation(frame)
    assert representations["gpu_ms"].sum() == pytest.approx(frame["gpu_ms"].sum())
    assert profile.top_dispatches(frame, 5)["gpu_ms"].is_monotonic_decreasing


def test_versus_compares_the_same_nodes_in_other_representations(tmp_path):
    first, second = recorded("bfs-downstream"), recorded("all-width-packed")
    result = profile.versus(first, second, RECORDED)
    changes = result["node_changes"]
    assert len(changes) > 0
    assert ((changes["inputs_bfs-downstream"] != changes["inputs_all-width-packed"])
            | (changes["output_bfs-downstream"] != changes["output_all-width-packed"])).all()
    kinds = result["operator_changes"].set_index("operator")
    assert kinds.loc[profile.TRANSITION, "delta_ms"] == pytest.approx(
        gpu_summary(second)["transition_gpu_ms"] - gpu_summary(first)["transition_gpu_ms"])
    chart = profile.chart({"bfs-downstream": first, "all-width-packed": second}, "synthetic_small", tmp_path / "c.png")
    assert chart.stat().st_size > 0


def _results_dir(directory: Path, device: str, limits: dict | None = None) -> Path:
    store = RecordStore(directory)
    for strategy in RECORDED:
        pte = ResultsDir(directory).program("synthetic_small", strategy)
        pte.parent.mkdir(parents=True, exist_ok=True)
        for suffix in (".etdump", ".nodes.json"):
            shutil.copyfile(DATA / f"{strategy}{suffix}", pte.with_suffix(suffix))
        store.append(make_record("synthetic_small", strategy, "vulkan-run", "ok",
                                 environment={"vulkan_device": device, "vulkan_limits": limits}))
    return directory


def test_cost_table_per_operator_and_representation_with_its_spread(tmp_path):
    first = _results_dir(tmp_path / "one", "lavapipe")
    table = costs.cost_table([first, first])
    assert set(table["device"]) == {"lavapipe"}
    assert (table["runs"] == 2).all() and (table["spread"] == 0).all()  # the same run twice
    assert (table["ns_per_element"] > 0).all()
    clones = table[table["operator"] == profile.TRANSITION]
    assert len(clones) >= 2  # several (input -> output) representation pairs
    assert costs.write(table, tmp_path / "costs.csv").read_text().startswith("device,operator")


def test_cost_table_without_etdumps_says_what_to_run(tmp_path):
    RecordStore(tmp_path).append(make_record("synthetic_small", "bfs-downstream", "vulkan", "ok"))
    with pytest.raises(FileNotFoundError, match="--target vulkan-run"):
        costs.cost_table([tmp_path])


def inspector_times(etdump: Path) -> tuple[list[float], float]:
    """Method::execute's times in the order they ran, and Method::init's, read with
    ExecuTorch's Inspector (not with the harness's reader)."""
    from executorch.devtools import Inspector

    events = [event for block in Inspector(etdump_path=str(etdump)).event_blocks for event in block.events]
    executions = [float(t) for event in events if event.name == "Method::execute" for t in event.perf_data.raw]
    return executions, next(float(event.perf_data.raw[0]) for event in events if event.name == "Method::init")


def tracer_gaps(etdump: Path) -> list[float]:
    """Per execution, the ms from ET-VK's graph end to its outputs' copy: where its event tracer
    logs every dispatch's GPU timestamps (0 where no ET-VK delegate ran)."""
    from executorch.devtools.etdump.serialize import deserialize_from_etdump_flatcc

    gaps = []
    for run in deserialize_from_etdump_flatcc(etdump.read_bytes()).run_data:
        spans = {e.profile_event.name or e.profile_event.delegate_debug_id_str: e.profile_event
                 for e in run.events or [] if e.profile_event}
        if "ETVK_COPY_OUTPUTS" in spans:
            gaps.append((spans["ETVK_COPY_OUTPUTS"].start_time - spans["ETVK_COMPUTE_GRAPH_EXECUTE"].end_time) / 1e6)
        elif "Method::execute" in spans:
            gaps.append(0.0)
    return gaps


@pytest.mark.parametrize("strategy", RECORDED)
def test_runtime_times_are_the_etdump_s_own_events(strategy):
    times = latency.read_runtime_times(DATA / f"{strategy}.etdump")
    executions, load = inspector_times(DATA / f"{strategy}.etdump")
    assert times.execute_ms == pytest.approx(executions) and len(executions) == 3
    assert times.load_ms == pytest.approx(load)
    assert all(0 < part < whole for part, whole in zip(times.graph_execute_ms, times.execute_ms))
    assert all(0 < part < whole for part, whole in zip(times.copy_inputs_ms, times.graph_execute_ms))
    assert times.event_tracer_ms == pytest.approx(tracer_gaps(DATA / f"{strategy}.etdump"))
    assert all(0 < tracer < whole - graph for tracer, whole, graph
               in zip(times.event_tracer_ms, times.execute_ms, times.graph_execute_ms))
    with pytest.raises(ValueError, match="holds 3 Method::execute events, fewer than the 4 timed inferences"):
        latency.event_latency([times], iterations=4)


def test_several_processes_make_the_record_of_the_fastest():
    """A process slow throughout (time added from outside the program) does not make the
    record: every figure is the fastest process's."""
    def process(ms: float, load: float) -> latency.RuntimeTimes:
        return latency.RuntimeTimes(load, [99.0, ms, ms + 0.2, ms - 0.2], [], [], [0.5] * 4)

    fields = latency.event_latency([process(5.1, 100.0), process(5.0, 200.0), process(6.0, 300.0)], iterations=3)
    assert fields["latency_ms_median"] == pytest.approx(5.0 - 0.5)
    assert (fields["latency_ms_min"], fields["latency_ms_max"]) == pytest.approx((4.3, 4.7))
    assert fields["method_execute_ms"] == pytest.approx(5.0) and fields["event_tracer_ms"] == 0.5
    assert fields["load_ms"] == 200.0 and fields["graph_execute_ms"] is None


IMPORTED_SETTINGS = {"warmup": 1, "iterations": 2, "repeats": 3}  # the kept ETDumps: 3 executions each


@pytest.fixture
def imported(tmp_path) -> tuple[Path, list[dict]]:
    """The kept ETDumps as if remote_runner.py had run their programs on another machine (the runner
    with the event tracer, one process of 1 + 2 executions each), imported by import-remote."""
    results, archive = _ran_elsewhere(tmp_path)
    out = tmp_path / "remote"
    return out, import_remote(results, archive, out)


def test_an_import_whose_local_program_is_gone_says_so_and_imports_nothing(tmp_path):
    results, archive = _ran_elsewhere(tmp_path)
    gone = ResultsDir(results).program("synthetic_small", RECORDED[-1])
    gone.unlink()
    with pytest.raises(UsageError, match=f"{gone} is missing: import into the results directory"):
        import_remote(results, archive, tmp_path / "remote")
    assert not (tmp_path / "remote" / "records.jsonl").exists()


def test_an_import_links_the_programs_it_measured_unless_asked_to_copy(tmp_path):
    """The records of an import are the same whether its programs are linked (the default: no
    program is copied) or copied; a link names the program in the results directory."""
    results, archive = _ran_elsewhere(tmp_path)
    linked = import_remote(results, archive, tmp_path / "linked")
    copied = import_remote(results, archive, tmp_path / "copied", copy_programs=True)
    drop = ("timestamp",)
    assert [{k: v for k, v in r.items() if k not in drop} for r in linked] == [
        {k: v for k, v in r.items() if k not in drop} for r in copied]
    for strategy in RECORDED:
        program = ResultsDir(tmp_path / "linked").program("synthetic_small", strategy)
        for path in (program, ResultsDir.beside(program, "node_map")):
            assert path.is_symlink() and path.resolve().is_relative_to(results.resolve())
        copy = ResultsDir(tmp_path / "copied").program("synthetic_small", strategy)
        assert not copy.is_symlink() and copy.read_bytes() == b"program"


@pytest.mark.parametrize("archive, message", [
    ("gone.tar", "archive {archive} does not exist: pass " + MADE_BY),
    ("not-a-tar.tar", "{archive} is not a tar archive: pass " + MADE_BY),
    ("no-summary.tar", "{archive} holds no remote.json that remote_runner.py or run.sh wrote: pass "
     f"{MADE_BY}, whole"),
    ("empty", "{archive} holds no remote.json that remote_runner.py or run.sh wrote: pass " + f"{MADE_BY}, whole"),
])
def test_an_archive_that_is_not_remote_runners_tar_is_one_line(tmp_path, capsys, archive, message):
    from harness import cli

    results, _ = _ran_elsewhere(tmp_path)
    (tmp_path / "not-a-tar.tar").write_text("ETDumps, honestly")
    (tmp_path / "empty").mkdir()  # a directory run.sh did not fill
    with tarfile.open(tmp_path / "no-summary.tar", "w") as tar:
        tar.add(DATA / f"{RECORDED[0]}.etdump", "synthetic_small/x.etdump")
    path = tmp_path / archive
    assert cli.main(["import-remote", str(results), str(path), "--out", str(tmp_path / "remote")]) == 2
    assert capsys.readouterr().err.splitlines() == ["layoutbench: error: " + message.format(archive=path)]
    assert not (tmp_path / "remote").exists()


def test_import_of_what_run_sh_could_not_measure_says_so(tmp_path, capsys):
    """A directory run.sh filled, with no device (no vulkaninfo, no --device) and no peak memory (no
    time -v): import-remote asks for --device in one line, then notes the peak memory's absence."""
    from harness import cli

    results, archive = _ran_elsewhere(tmp_path)
    returned = tmp_path / "returned"
    with tarfile.open(archive) as tar:
        tar.extractall(returned, filter="data")
    summary = json.loads((returned / "remote.json").read_text())
    summary.update(device=None, made_by="run.sh",
                   unknown={"device": "no vulkaninfo", "peak_rss_bytes": "no time -v here"})
    for run in summary["programs"].values():
        run["peak_rss_bytes"] = None
    (returned / "remote.json").write_text(json.dumps(summary))
    argv = ["import-remote", str(results), str(returned), "--out", str(tmp_path / "remote")]
    assert cli.main(argv) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"layoutbench: error: {returned} does not say which Vulkan device ran its programs (no vulkaninfo): "
        "pass --device NAME"]
    assert cli.main([*argv, "--device", "Adreno (TM) 740", "--format", "json"]) == 0
    for record in json.loads(capsys.readouterr().out):
        assert record["environment"]["vulkan_device"] == "Adreno (TM) 740" and record["peak_rss_bytes"] is None
        assert record["run_note"] == ("run on elsewhere (Adreno (TM) 740) by run.sh; peak memory not measured: "
                                      "no time -v here; outputs not compared: none came back (an earlier "
                                      "remote_runner.py or run.sh)")
        assert record["gpu_dispatch_ms"] > 0  # the ETDumps copied from the directory, attributed


def _ran_elsewhere(tmp_path) -> tuple[Path, Path]:
    """A results directory of the recorded programs and remote_runner.py's archive of their runs."""
    results, archive = tmp_path / "results", tmp_path / "remote.tar"
    store = RecordStore(results)
    runs = {}
    with tarfile.open(archive, "w") as tar:
        for strategy in RECORDED:
            pte = ResultsDir(results).program("synthetic_small", strategy)
            pte.parent.mkdir(parents=True, exist_ok=True)
            pte.write_bytes(b"program")  # import-remote copies it beside the records; nothing reads it
            shutil.copyfile(DATA / f"{strategy}.nodes.json", pte.with_suffix(".nodes.json"))
            store.append(make_record("synthetic_small", strategy, "vulkan-run", "ok", model_digest="m",
                                     strategy_digest=strategy, harness_digest="h", environment={},
                                     latency_ms_median=1000.0, latency_source="wall-clock"))
            name = str(ResultsDir(Path()).program("synthetic_small", strategy))
            runs[name] = {"latencies_ms": None, "peak_rss_bytes": 1, "etdump": True}
            tar.add(DATA / f"{strategy}.etdump", str(Path(name).with_suffix(".etdump")))
        summary = tmp_path / "remote.json"
        summary.write_text(json.dumps({"device": "lavapipe", "limits": LAVAPIPE_LIMITS, "machine": "elsewhere",
                                       "runner_digest": "r",
                                       "settings": IMPORTED_SETTINGS, "programs": runs}))
        tar.add(summary, "remote.json")
    return results, archive


def test_imported_latency_is_the_median_of_the_timed_method_execute_events(imported):
    """The record's latency is the median of the Method::execute events of the ETDump kept in
    its results directory, each less the event tracer's logging inside it, the warm-up's first
    execution left out."""
    out, records = imported
    assert {r["strategy"] for r in records} == set(RECORDED)
    for record in records:
        etdump = ResultsDir.beside(ResultsDir(out).program("synthetic_small", record["strategy"]), "etdump")
        executions, load = inspector_times(etdump)
        warmup = IMPORTED_SETTINGS["warmup"]
        timed = [whole - tracer for whole, tracer in zip(executions, tracer_gaps(etdump))][warmup:]
        assert record["latency_source"] == "etdump" and record["iterations"] == 2
        assert record["environment"]["vulkan_limits"] == LAVAPIPE_LIMITS  # the other machine's device's
        assert record["latency_ms_median"] == pytest.approx(statistics.median(timed), rel=1e-9)
        assert record["method_execute_ms"] == pytest.approx(statistics.median(executions[warmup:]), rel=1e-9)
        assert record["latency_ms_median"] != pytest.approx(statistics.median(executions[warmup:]), rel=1e-3)
        assert (record["latency_ms_min"], record["latency_ms_max"]) == pytest.approx((min(timed), max(timed)))
        assert record["load_ms"] == pytest.approx(load)
        assert 0 < record["copy_inputs_ms"] < record["graph_execute_ms"] < record["latency_ms_median"]
        assert profile.summary(recorded(record["strategy"]), record)["latency_ms_median"] == record[
            "latency_ms_median"]


def test_asv_tracks_the_record_s_latency(imported):
    """asv's Vulkan inference values for a (model, strategy) are its vulkan-run record's."""
    from benchmarks import bench_vulkan_inference

    _, records = imported
    by_params = {(r["model"], r["strategy"]): r for r in records}
    bench = bench_vulkan_inference.VulkanInference()
    for (model, strategy), record in by_params.items():
        bench.setup(by_params, model, strategy)
        assert bench.track_latency_ms(by_params, model, strategy) == record["latency_ms_median"]
        assert bench.track_load_ms(by_params, model, strategy) == record["load_ms"]
        assert bench.track_gpu_dispatch_ms(by_params, model, strategy) == record["gpu_dispatch_ms"]
    assert bench.track_latency_ms.unit == bench.track_load_ms.unit == "ms"
    wall_clock = {key: {**record, "latency_source": "wall-clock"} for key, record in by_params.items()}
    bench.setup(wall_clock, "synthetic_small", "bfs-downstream")
    with pytest.raises(NotImplementedError, match="EVENT_TRACER"):
        bench.track_latency_ms(wall_clock, "synthetic_small", "bfs-downstream")


def test_profile_reads_another_machine_s_runs_without_running_anything(imported, capsys):
    from harness import cli

    out, records = imported
    argv = ["profile", "synthetic_small", "--strategy", "bfs-downstream", "--vs", "all-width-packed",
            "--out", str(out), "--recorded", "--workers", "0", "--format", "json"]
    assert cli.main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    first = next(r for r in records if r["strategy"] == "bfs-downstream")
    assert result["summary"]["gpu_dispatch_ms"] == pytest.approx(first["gpu_dispatch_ms"])
    assert result["vs"] == "all-width-packed" and result["operator_changes"]
    assert cli.main([*argv[:3], "ilp", *argv[6:]]) == 2
    assert "has no vulkan-run record of synthetic_small / ilp" in capsys.readouterr().err


def test_calibrate_fits_a_cost_table_from_runs_made_elsewhere(tmp_path, capsys):
    from harness import cli

    runs = _results_dir(tmp_path / "runs", "lavapipe", LAVAPIPE_LIMITS)
    table_path = tmp_path / "lavapipe.json"
    assert cli.main(["calibrate", "--fit", str(runs), "--table", str(table_path)]) == 0
    table = load_table(table_path)
    assert table.device == "lavapipe" and table.nodes and table.model.kind == "lightgbm"
    assert table.limits.to_json() == LAVAPIPE_LIMITS  # the device's limits, as its runs read them
    graph = json.loads((DATA / "bfs-downstream.nodes.json").read_text())["partitions"][0]["graph"]
    # A node's price is its time in that pair of representations, the median over the programs
    # that ran it so.
    times: dict = {}
    for strategy in RECORDED:
        frame = recorded(strategy)
        frame = frame[(frame["operator"] != STAGING) & ~frame["transition"]]
        for (node, inputs, output), part in frame.groupby(["node", "inputs", "output"]):
            times.setdefault((node, inputs.split(", ")[0], output), []).append(part["gpu_ms"].sum())
    for (node, inputs, output), ms in times.items():
        assert table.nodes[(graph, node, inputs, output)] == pytest.approx(statistics.median(ms))
    assert cli.main(["calibrate", "--out", str(tmp_path / "x")]) == 2
    assert "say what to calibrate on" in capsys.readouterr().err


def test_calibrate_keeps_the_device_s_limits_with_its_nodes_or_takes_them_stated_by_hand(tmp_path, capsys):
    """The limits runs read travel with the kept nodes; a table of runs that read none has none,
    unless --limits states them (a phone's, from its vulkaninfo)."""
    from harness import cli

    runs, kept = _results_dir(tmp_path / "runs", "lavapipe", LAVAPIPE_LIMITS), tmp_path / "nodes.jsonl.gz"
    assert load_measurements([runs]).limits.to_json() == LAVAPIPE_LIMITS
    write_measurements(load_measurements([runs]), kept)
    assert read_measurements(kept).limits.to_json() == LAVAPIPE_LIMITS
    unknown = _results_dir(tmp_path / "unknown", "lavapipe")
    assert load_measurements([unknown]).limits is None
    table_path = tmp_path / "phone.json"
    phone = {"maxImageDimension3D": 16384, "maxStorageBufferRange": 134217728}
    assert cli.main(["calibrate", "--fit", str(unknown), "--table", str(table_path), "--limits",
                     ",".join(f"{name}={value}" for name, value in phone.items())]) == 0
    assert load_table(table_path).limits.to_json() == phone
    assert "its limits {'maxImageDimension3D': 16384" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["calibrate", "--fit", str(unknown), "--limits", "maxImageDimension3D=big"])
    assert "argument --limits: expected NAME=NUMBER" in capsys.readouterr().err


def test_costs_prices_each_operator_per_element_from_runs_made_elsewhere(imported, tmp_path, capsys):
    """The ``costs`` command on the imported runs: one row per (device, operator, representations),
    its time per output element, and the file it also writes holding the same table."""
    from harness import cli

    out, _ = imported
    written = tmp_path / "costs.json"
    assert cli.main(["costs", str(out), str(out), "--format", "json", "--out", str(written)]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows == json.loads(written.read_text())
    priced = {(row["operator"], row["output"]) for row in rows}
    width, channels = "TEXTURE_3D/WIDTH_PACKED", "TEXTURE_3D/CHANNELS_PACKED"
    # the two strategies gave add both packings, and their transitions go both ways
    assert {("aten.add.Tensor", width), ("aten.add.Tensor", channels), ("transition", width),
            ("transition", channels)} <= priced
    assert all(row["ns_per_element"] > 0 and row["runs"] == 2 and row["spread"] == 0 for row in rows)
    assert len({(row["device"], row["operator"], row["inputs"], row["output"]) for row in rows}) == len(rows)
