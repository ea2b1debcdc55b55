"""Arm targets on small models: TOSA transposes and the reference model, Ethos-U estimates,
and Vela's rejection recorded as a failed record, not an exception."""

import contextlib
import io
import json

import pytest

from harness import cli

# resnet18's TOSA graph, by hand (facts/arm.md): 132 operators, one TRANSPOSE (the input
# NCHW -> NHWC), which writes 1 x 224 x 224 x 3 fp32.
RESNET18_TRANSPOSE_BYTES = 224 * 224 * 3 * 4
# Five operators (conv, permute, mul, conv, linear): every Arm flow in seconds, transposes kept.
FIVE_OPERATORS = "synthetic:5:1"


def test_every_arm_target_measures_a_graph_of_five_operators(tmp_path, capsys):
    """What the resnet18 checks below hold, on a graph Ethos-U lowers in seconds: TOSA counts
    its transposes and matches eager on the reference model, Vela estimates both NPUs, VGF
    runs the same TOSA graph on Vulkan and matches eager too."""
    assert cli.main(["compare", "--models", FIVE_OPERATORS, "--target", "tosa,ethos-u55-128,ethos-u85-256,vgf",
                     "--out", str(tmp_path), "--format", "json"]) == 0
    records = {r["target"]: r for r in json.loads(capsys.readouterr().out)}
    assert all(record["status"] == "ok" for record in records.values()), records
    tosa, vgf = records["tosa"], records["vgf"]
    assert tosa["transposes"] > 0 and tosa["transpose_bytes"] > 0 and tosa["partitions"] == 1
    for record in (tosa, vgf):
        assert record["max_abs_error"] < 1e-5 and record["latency_ms_median"] > 0
    assert vgf["transposes"] == tosa["transposes"] and vgf["setup_seconds"] > 0
    for npu in ("ethos-u55-128", "ethos-u85-256"):
        assert records[npu]["cycles"] > 0 and 0 < records[npu]["transpose_cycle_share"] < 1


@pytest.fixture(scope="module")
def arm_records(tmp_path_factory):
    out = tmp_path_factory.mktemp("arm")
    argv = ["compare", "--models", "resnet18,vit_small_1block", "--target", "tosa,ethos-u55-128,ethos-u85-256,vgf",
            "--out", str(out), "--format", "json"]
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        status = cli.main(argv)
    records = {(r["model"], r["target"]): r for r in json.loads(stdout.getvalue())}
    return status, records


@pytest.mark.slow  # the module's Arm sweep of resnet18 and a ViT block: 210 s
def test_tosa_counts_transposes_and_matches_eager_on_the_reference_model(arm_records):
    _, records = arm_records
    resnet = records[("resnet18", "tosa")]
    assert resnet["status"] == "ok" and resnet["strategy"] is None
    assert (resnet["partitions"], resnet["tosa_ops"], resnet["transposes"]) == (1, 132, 1)
    assert resnet["transpose_bytes"] == RESNET18_TRANSPOSE_BYTES
    assert resnet["max_abs_error"] < 1e-5 and resnet["top1_match"] is True
    assert resnet["latency_ms_median"] > 0 and resnet["lowering_seconds"] > 0
    # A ViT block: the input's transpose plus three around attention.
    assert records[("vit_small_1block", "tosa")]["transposes"] == 4


@pytest.mark.slow  # the module's Arm sweep of resnet18 and a ViT block: 210 s
def test_ethos_u_estimates_from_vela(arm_records):
    _, records = arm_records
    u55, u85 = records[("resnet18", "ethos-u55-128")], records[("resnet18", "ethos-u85-256")]
    for record in (u55, u85):
        assert record["status"] == "ok"
        assert record["cycles"] > 1e6 and record["sram_bytes"] > 0
        assert 0 < record["transpose_cycle_share"] < 1
        assert record["transposes"] == 1  # the INT8 graph Vela compiled
    # By hand: U55-128 20.4 M cycles at 500 MHz (24.5 inferences/s), U85-256 8.7 M.
    assert u55["cycles"] == pytest.approx(20.39e6, rel=0.02)
    assert u55["inferences_per_second"] == pytest.approx(24.5, rel=0.02)
    assert u85["cycles"] == pytest.approx(8.66e6, rel=0.02)


@pytest.mark.slow  # the module's Arm sweep of resnet18 and a ViT block: 210 s
def test_vela_rejection_is_a_failed_record_and_the_sweep_goes_on(arm_records):
    status, records = arm_records
    rejected = records[("vit_small_1block", "ethos-u55-128")]
    assert rejected["status"] == "failed"
    assert rejected["reason"] == "Vela rejected the model: Non-passthrough operation (Transpose) could not run on NPU"
    assert records[("vit_small_1block", "ethos-u85-256")]["status"] == "ok"
    assert status == 1  # a failed record makes the exit code 1


@pytest.mark.slow  # lowers resnet18 for TOSA, which the module's sweep made where it ran first
def test_arm_targets_record_the_backend_not_vulkan_strategies(tmp_path, capsys):
    assert cli.main(["compare", "--models", "resnet18", "--target", "tosa", "--strategies", "bfs-downstream",
                     "--out", str(tmp_path), "--format", "json"]) == 0
    records = json.loads(capsys.readouterr().out)
    assert [(r["strategy"], r["target"]) for r in records] == [(None, "tosa")]


@pytest.mark.slow  # the module's Arm sweep of resnet18 and a ViT block: 210 s
def test_vgf_runs_on_vulkan_through_the_scenario_runner(arm_records):
    _, records = arm_records
    resnet = records[("resnet18", "vgf")]
    assert resnet["status"] == "ok", resnet["reason"]
    assert resnet["transposes"] == 1 and resnet["partitions"] == 1
    assert resnet["max_abs_error"] < 1e-5 and resnet["top1_match"] is True
    assert resnet["setup_seconds"] > 0 and resnet["latency_ms_median"] > 0


def test_a_host_that_cannot_run_vgf_skips_with_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("LAYOUTBENCH_VULKAN_ICD", str(tmp_path / "no_icd.json"))
    assert cli.main(["compare", "--models", "synthetic_small", "--target", "vgf", "--out", str(tmp_path),
                     "--format", "json"]) == 0
    captured = capsys.readouterr()
    [record] = json.loads(captured.out)
    assert record["status"] == "skipped"
    assert record["reason"] == f"no Vulkan driver at {tmp_path / 'no_icd.json'}: install Debian's mesa-vulkan-drivers (lavapipe)"
    assert f"skipped: {record['reason']}" in captured.err
