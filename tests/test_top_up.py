"""``calibrate --top-up``: a table topped up for one model whose nodes lie outside its support,
on a stand-in device that measures what the top-up's programs hold."""

import io
import json
from dataclasses import replace

import pandas as pd
import pytest

from costmodel.features import TRANSITION
from costmodel.fit import fit, topped_up
from costmodel.intervals import Intervals
from costmodel.kernel_families import FAMILY_SHADERS
from costmodel.measurements import NODE_COLUMNS, PROGRAM_COLUMNS, Measurements
from costmodel.per_operator import PerOperatorModel
from costmodel.queries import ANY
from costmodel.support import FEATURES, Support
from costmodel.table import CostTable, load, save

from .test_gpu_time import NAMES, _measurements

MODEL = "synthetic:6:1"  # a convolution, a linear and a few elementwise and view nodes: lowers in seconds
LEFT_OUT = "conv2d:direct"  # the family of its convolutions, which the table below never measured
RELU, GELU = "aten.relu.default", "aten.gelu.default"
DEVICE = "stand-in H200"  # the device the runs were of; the table is of another that runs ET-VK alike


def _table_without_convolutions() -> CostTable:
    """A hand-built table: every family MODEL has measured at any size but its convolutions'."""
    families = [f for f in FAMILY_SHADERS if not f.startswith("conv")] + ["mul", "permute_copy", "view_copy"]
    support = Support({f: {feature: [-100.0, 100.0] for feature in FEATURES} for f in families}, dict.fromkeys(families, 1))
    lines = {("aten.convolution.default", ANY, ANY): (0.05, 0.0), ("aten.linear.default", ANY, ANY): (0.01, 0.0),
             (TRANSITION, ANY, ANY): (0.002, 0.001)}
    intervals = Intervals.of([-0.05, 0.0, 0.05] * 10, [0.0] * 30, {"mul": [0.3]})
    return CostTable("stand-in", PerOperatorModel(lines), support=support, intervals=intervals).identified()


def _stand_in_device(measured: list):
    """A sweep that, in place of running the top-up's programs on :data:`DEVICE`, lowers each
    (as a worker would) and measures every operator node of it at 0.02 ms; its measurements
    are appended to ``measured``."""
    from costmodel.queries import pair_name
    from harness.inspection.kernel_coverage import lowered_program
    from harness.targets.vulkan.compile.metrics import assignments

    def sweep(args, models, names, targets):
        table, rows = load(args.costs), []
        for name in names:
            for assignment in assignments(lowered_program(models[0], name, table)):
                problem = assignment.problem
                rows += [{"model": models[0], "strategy": name, "run": 0, "partition": 0, "graph": problem.graph,
                          "node": op, "operator": problem.operators[op].operator, "transition": False,
                          "input": pair_name(a) if a else "", "output": pair_name(b),
                          "signature": problem.operators[op].signature, "ms": 0.02, "processes": 1}
                         for op, a, b in assignment.operator_reprs()]
        programs = pd.DataFrame([[0, models[0], name, None, [1.0]] for name in names], columns=PROGRAM_COLUMNS)
        measured.append(Measurements(DEVICE, pd.DataFrame(rows, columns=NODE_COLUMNS), programs))
        return [{"status": "ok", "model": models[0], "strategy": name} for name in names]

    return sweep


def _top_up(costs, out, *options) -> int:
    from harness import cli

    return cli.main(["calibrate", "--top-up", MODEL, "--costs", str(costs), "--strategies", "bfs-downstream",
                     "--out", str(out), "--workers", "0", *options])


def test_a_top_up_packed_for_a_device_elsewhere_measures_only_the_nodes_outside_the_support_and_folds_them_in(
        tmp_path, monkeypatch, capsys):
    """Packed for a stand-in device, then its runs folded in as the packing says: the
    programs packed are top-up rounds only, each covering pairs outside the support; after,
    the model's nodes are priced as measured, nothing of it outside the support."""
    from harness.commands import top_up
    from harness.targets.vulkan.local import measured_nodes
    from harness.targets.vulkan.remote import packing

    costs, out, device_runs = tmp_path / "costs.json", tmp_path / "top-up", tmp_path / "device-runs"
    save(_table_without_convolutions(), costs)
    before, measured = costs.read_bytes(), []
    monkeypatch.setattr(top_up, "sweep", _stand_in_device(measured))
    monkeypatch.setattr(packing, "pack", lambda results, archive: len(measured[-1].programs))
    assert _top_up(costs, out, "--pack", str(tmp_path / "top-up.tar")) == 0
    err = capsys.readouterr().err
    [programs] = measured
    rounds = sorted(programs.programs["strategy"])
    assert f"in {LEFT_OUT} (" in err  # its three convolutions, one pair each: one round measures them all
    assert ("1 top-up program measures 3 of the 3 node x representation pairs outside the support, 3 of the 3 that "
            "bfs-downstream hold") in err and rounds == ["calibration-top-up-1"]
    assert (f"import-remote {out} ARCHIVE --out DEVICE_RUNS; layoutbench calibrate --top-up {MODEL} --costs {costs} "
            f"--fit DEVICE_RUNS --out {out}") in err

    def load_measurements(sources, device):  # as the device's runs would be read, and named ``device``'s
        assert sources == [str(device_runs)]
        return replace(programs, device=device or programs.device, measured_on=(DEVICE,) if device else ())

    monkeypatch.setattr(measured_nodes, "load_measurements", load_measurements)
    assert _top_up(costs, out, "--fit", str(device_runs)) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"layoutbench: error: the runs are of {DEVICE}, the table of stand-in: where the one runs ET-VK as the other "
        "does, add --as-device \"stand-in\""]
    assert _top_up(costs, out, "--fit", str(device_runs), "--as-device", "stand-in") == 0
    captured = capsys.readouterr()
    assert f"node prices of {MODEL} (measured on {DEVICE}) added and 0 replaced by its own; its fit kept" in captured.err
    assert costs.read_bytes() == before  # the input table is left as it was
    new = load(out / "costs.json")
    assert all(new.nodes[(r.graph, r.node, r.input, r.output)] == 0.02 for r in programs.nodes.itertuples())
    assert new.corpus["topped_up"] == [MODEL]
    [row] = pd.read_fwf(io.StringIO(captured.out)).to_dict("records")
    assert row["outside_share_before"] > 0 and row["outside_nodes_before"] == 3
    assert row["outside_share_after"] == 0 and row["outside_nodes_after"] == 0

    for name, table, share in (("before", costs, row["outside_share_before"]), ("after", out / "costs.json", 0)):
        record = _record_under(table, tmp_path / name, capsys)  # a record says the same
        assert record["predicted_outside_support_share"] == pytest.approx(share, abs=1e-4)

    # Topped up, the model has nothing outside: a second top-up says so, and writes nothing.
    assert _top_up(out / "costs.json", tmp_path / "again") == 2
    [line] = capsys.readouterr().err.splitlines()[-1:]
    assert line.startswith("layoutbench: error: nothing to top up:") and not (tmp_path / "again").exists()


def _record_under(costs, out, capsys) -> dict:
    """MODEL's bfs-downstream record (lowered, not run) under the table ``costs``."""
    from harness import cli

    assert cli.main(["run", "--models", MODEL, "--strategies", "bfs-downstream", "--target", "vulkan", "--costs",
                     str(costs), "--out", str(out), "--workers", "0", "--format", "json"]) == 0
    [record] = json.loads(capsys.readouterr().out)
    return record


def test_a_table_without_support_is_refused_in_one_line(tmp_path, capsys):
    costs = tmp_path / "costs.json"
    save(CostTable("gpu", PerOperatorModel({})).identified(), costs)
    assert _top_up(costs, tmp_path / "out") == 2
    assert capsys.readouterr().err.splitlines() == [
        f"layoutbench: error: {costs} states no support, so nothing can be said to lie outside it: fit it with this "
        "layoutbench (calibrate --fit NODES) first"]


@pytest.mark.parametrize("options, error", [
    (["--models", "synthetic_small"], "--top-up lowers its own programs for one model: drop --models"),
    (["--pack", "a.tar", "--fit", "runs"], "--pack packs the top-up's programs for a device elsewhere; --fit folds"),
    (["--costs", ""], "--top-up tops up a cost table: name it with --costs TABLE"),
    (["--top-up", "synthetic_small,synthetic:6:1"], "--top-up tops a table up for one model, not 2: run it once"),
], ids=["models", "pack and fit", "no table", "two models"])
def test_a_top_up_asked_wrongly_is_refused_in_one_line(tmp_path, capsys, options, error):
    assert _top_up(tmp_path / "costs.json", tmp_path / "out", *options) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"layoutbench: error: {error}")


def _relus(model: str, count: int = 8) -> list[tuple]:
    return [(model, f"n{i}", RELU, (1, 4 + i, 8, 8), NAMES[0], 0.001 * (i + 1)) for i in range(count)]


def test_the_models_own_measurements_win_and_with_the_corpus_the_support_grows():
    corpus = _measurements([row for model in ("m0", "m1", "m2", "m3") for row in _relus(model)])
    table = fit(corpus)
    assert set(table.support.ranges) == {"relu"}
    remeasured = ("m0", "n0", RELU, (1, 4, 8, 8), NAMES[0], 0.5)  # the corpus has it at 0.001 ms
    own = _measurements([remeasured, *[("new", f"g{i}", GELU, (1, 8, 8, 8 + i), NAMES[0], 0.004) for i in range(6)]])

    kept = topped_up(table, own)
    assert kept.nodes[("m0", "n0", NAMES[0], NAMES[0])] == 0.5 and kept.nodes[("new", "g0", NAMES[0], NAMES[0])] == 0.004
    assert json.dumps(kept.model.to_json()) == json.dumps(table.model.to_json()) and kept.support == table.support
    assert table.nodes[("m0", "n0", NAMES[0], NAMES[0])] == pytest.approx(0.001)  # the input table is not changed
    assert kept.corpus["topped_up"] == ["m0", "new"] and kept.digest != table.digest

    refit = topped_up(table, own, corpus)
    assert refit.support.nodes["gelu"] == 6 and refit.nodes[("m0", "n0", NAMES[0], NAMES[0])] == 0.5
