"""A new device's table from a few programs and another device's table: the new device's
ratio to the prior is learned per operator and representations, its own measurements win,
the programs chosen are those that teach the most for their cost, a prior that holds is kept,
and the study scores all of it on models the fit never saw."""

import random

import pandas as pd
import pytest

from benchmarks import few_shot_study
from costmodel.fit import transferred
from costmodel.measurements import Measurements
from costmodel.per_operator import PerOperatorModel
from costmodel.program_choice import choose_programs
from costmodel.queries import ANY, Query
from costmodel.table import CostTable, parse
from harness.inspection import few_shot, validation
from harness.sweep import table_check

from .test_gpu_time import NAMES, _measurements, _query
from .test_vulkan_run import real_runner  # noqa: F401  (a fixture)

RELU, GELU = "aten.relu.default", "aten.gelu.default"
PAIR = NAMES[0]


def _prior() -> CostTable:
    """An old device: a relu costs 1 us plus 1 ns per element, a gelu 2 us plus 3 ns."""
    return CostTable("old", PerOperatorModel({(RELU, ANY, ANY): (0.001, 1.0), (GELU, ANY, ANY): (0.002, 3.0)}),
                     errors={RELU: 0.05, GELU: 0.3}, spread=0.01).identified()


def _device(ratios: dict, models=4, nodes=30, noise=0.0, seed=0, gelus=lambda model: 0.5) -> Measurements:
    """A new device's measurements of ``models`` made-up models (``gelus(model)``: the share of
    its nodes that are gelus, the rest relus): each node the prior's price times its
    operator's ratio (and a random factor within ``noise``)."""
    rng, prior, rows = random.Random(seed), _prior(), []
    for model in range(models):
        for index in range(nodes):
            operator = GELU if index < gelus(model) * nodes else RELU
            shape = (1, rng.randint(2, 64), rng.randint(2, 64), rng.randint(1, 64))
            ms = prior.price([_query("x", operator, shape)])[0].ms * ratios[operator]
            rows.append((f"m{model}", f"n{index}", operator, shape, PAIR, ms * (1 + rng.uniform(-noise, noise))))
    return _measurements(rows, device="new")


def test_a_transferred_table_prices_as_its_prior_times_the_device_s_ratio_and_its_own_nodes_win(tmp_path):
    measurements = _device({RELU: 2.0, GELU: 8.0})
    table = transferred(_prior(), measurements)
    own_row = measurements.nodes.iloc[0]
    relu, gelu, own = table.price([_query("unseen", RELU, (1, 20, 30, 40)), _query("unseen", GELU, (1, 20, 30, 40)),
                                   Query(own_row["signature"], PAIR, PAIR, False, own_row["graph"], own_row["node"])])
    prior_relu, prior_gelu = _prior().price([_query("unseen", RELU, (1, 20, 30, 40)),
                                             _query("unseen", GELU, (1, 20, 30, 40))])
    # the ratio of each operator, pulled a little (5 nodes' worth) towards the device's
    assert relu.ms / prior_relu.ms == pytest.approx(2.0, rel=0.1) and not relu.measured
    assert gelu.ms / prior_gelu.ms == pytest.approx(8.0, rel=0.1)
    assert own.measured and own.ms == own_row["ms"]
    assert table.corpus["prior"] == _prior().name and table.spread == _prior().spread
    path = tmp_path / "new.json"
    path.write_bytes(table.to_bytes())
    again = table_check.load_checked(path)  # a transferred table builds, and reads back as it was written
    assert again.to_bytes() == table.to_bytes() == parse(path.read_bytes()).to_bytes()
    assert [p.ms for p in again.price([_query("unseen", GELU, (1, 20, 30, 40))])] == [gelu.ms]


def test_a_transferred_table_expects_the_error_its_left_out_models_showed():
    exact, noisy = (transferred(_prior(), _device({RELU: 2.0, GELU: 8.0}, noise=noise))
                    for noise in (0.0, 0.5))
    assert exact.errors[RELU] < 0.01 and exact.errors[GELU] < 0.01
    assert noisy.errors[RELU] > 0.02 and noisy.errors[GELU] > 0.02
    alone = transferred(_prior(), _device({RELU: 2.0, GELU: 8.0}, models=1))
    assert alone.errors == _prior().errors  # one model: nothing left out, the prior's


def test_the_programs_chosen_cover_what_the_prior_spends_time_on_for_their_cost():
    rows = []
    for model, operators, count in (("small", (RELU,), 10), ("both", (RELU, GELU), 10), ("large", (RELU, GELU), 80)):
        for index in range(count):
            operator = operators[index % len(operators)]
            rows.append((model, f"n{index}", operator, (1, 8, 8, 8 + index), PAIR, 0.01 if operator == GELU else 0.001))
    candidates = _measurements(rows)
    chosen = choose_programs(candidates, _prior(), 1)
    # "both" covers the gelus, where the time is and the prior unsure, at an eighth of "large"'s cost
    assert list(chosen["model"]) == ["both"] and chosen["new_operators"].tolist() == [2]
    # then "large", whose 40 gelus teach more than "small"'s relus for eight times the cost
    assert list(choose_programs(candidates, _prior(), 3)["model"]) == ["both", "large", "small"]
    assert list(choose_programs(candidates, _prior(), 5, among=[("small", "s")])["model"]) == ["small"]


def test_a_prior_that_holds_is_kept_and_one_that_does_not_is_not():
    holds = few_shot.prior_check(_prior(), _device({RELU: 1.0, GELU: 1.0}, noise=0.004))
    assert holds.holds and holds.prior_error < 0.01 and holds.factor == pytest.approx(1.0, abs=0.01)
    slower = few_shot.prior_check(_prior(), _device({RELU: 1.0, GELU: 3.0}, noise=0.004))
    assert not slower.holds and slower.transferred_error < slower.prior_error - slower.spread
    with pytest.raises(ValueError, match="two models"):
        few_shot.prior_check(_prior(), _device({RELU: 1.0, GELU: 1.0}, models=1))


def test_the_study_scores_each_method_on_the_models_its_programs_left_out():
    mostly = [0.1, 0.9, 0.2, 0.8, 0.3, 0.7]  # gelus in each model: one factor cannot price them all
    held_out = _device({RELU: 2.0, GELU: 8.0}, models=6, nodes=60, noise=0.05, gelus=mostly.__getitem__)
    candidates = _device({RELU: 1.0, GELU: 1.0}, models=6, nodes=60, gelus=mostly.__getitem__)  # the prior's runs
    results = few_shot_study.study(_prior(), candidates, held_out, budgets=[2]).set_index(["budget", "method"])
    few, scaled = results.loc[(2, "few-shot")], results.loc[(2, "prior, one factor")]
    assert few["models"] == scaled["models"] == 4  # two models' programs fitted, four scored
    assert few["median_error"] < 0.05 < scaled["median_error"]
    whole = results.xs("whole table, model left out", level="method")
    assert list(whole["models"]) == [4, 6]
    every_program = results.reset_index().query("budget.isna()").set_index("method")
    assert every_program.loc["few-shot", "models"] == 6 and every_program.loc["few-shot", "median_error"] < 0.05


def test_the_study_and_the_validation_pair_programs_not_runs_of_one_program():
    """Two runs of one program measured apart predict alike: not a pair either orders wrongly.
    Both score by one rule: bfs-downstream's runs merged, its one pair with ilp ordered."""
    programs = pd.DataFrame(
        [("1", "m", "bfs-downstream", 1.0, 0.99, 1.01, 1.1), ("2", "m", "bfs-downstream", 1.2, 1.19, 1.21, 1.1),
         ("1", "m", "ilp", 2.0, 1.99, 2.01, 2.2), ("1", "m", "calibration-1", 9.0, 8.9, 9.1, 0.1)],
        columns=["run", "model", "strategy", "measured_ms", "low_ms", "high_ms", "predicted_ms"],
    ).assign(predicted_low_ms=0.5, predicted_high_ms=3.0, outside_share=0.0, costs="table", table="table")
    assert few_shot_study.scores(programs)["pairs_ordered"] == 1.0
    assert validation.summary(programs)["ordered_pairs"].tolist() == ["1/1"]
    merged = validation.strategy_programs(programs).set_index("strategy")
    assert merged.loc["bfs-downstream", ["measured_ms", "low_ms", "high_ms"]].tolist() == [1.1, 0.99, 1.21]
    with pytest.raises(ValueError, match="merge its runs first"):
        validation.ordered_pairs(programs)


def test_a_prior_far_off_does_not_hold_where_a_transfer_from_the_check_programs_does_no_better():
    """lavapipe's ten programs under the H100 prior: the prior 99.8 % off, tables transferred
    without each model 163 % off. Neither is usable; the prior must not be kept for that."""
    far_off = few_shot.PriorCheck(prior_error=0.998, transferred_error=1.631, factor=721.18, spread=0.007)
    assert not far_off.holds
    within = few_shot.PriorCheck(prior_error=0.011, transferred_error=0.0097, factor=0.98, spread=0.0067)
    assert within.holds  # the H200's check


def test_for_a_device_elsewhere_the_chosen_programs_are_checked_here_once_and_packed(tmp_path, real_runner, capsys):
    """``--pack``: each chosen program lowered and run here once (its outputs against eager, its
    time taken there), packed for remote_runner.py, and the next steps said; nothing fitted."""
    import tarfile

    from harness import cli
    from harness.results.results_dir import ResultsDir
    from harness.results.store import RecordStore

    from .test_dispatches import _results_dir

    runs = _results_dir(tmp_path / "runs", "old GPU")
    prior = tmp_path / "old.json"
    assert cli.main(["calibrate", "--fit", str(runs), "--table", str(prior),
                     "--nodes", str(tmp_path / "old-nodes.jsonl.gz")]) == 0
    out, packed = tmp_path / "new", tmp_path / "new.tar"
    assert cli.main(["calibrate", "--prior", str(prior), "--budget", "1", "--out", str(out), "--pack", str(packed),
                     "--workers", "0"]) == 0
    err = capsys.readouterr().err
    [record] = RecordStore(out).read()
    assert record["status"] == "ok" and record["model"] == "synthetic_small" and record["iterations"] == 1
    assert record["environment"]["run_settings"]["processes"] == record["environment"]["run_settings"]["warmup"] == 1
    assert f"programs/synthetic_small/{record['strategy']}.pte" in tarfile.open(packed).getnames()
    assert f"import-remote {out} ARCHIVE" in err and f"calibrate --fit DEVICE_RUNS --prior {prior}" in err
    assert not ResultsDir(out).cost_table.exists()
    assert cli.main(["calibrate", "--fit", str(runs), "--pack", str(packed)]) == 2
    assert "--pack packs the programs --prior chooses" in capsys.readouterr().err


def _prior_beside_its_nodes(tmp_path):
    """``_prior()`` written as a table with four models' kept nodes beside it (``--prior``'s input)."""
    from costmodel.measurements import write_measurements

    prior = tmp_path / "old.json"
    prior.write_bytes(_prior().to_bytes())
    nodes = write_measurements(_device({RELU: 1.0, GELU: 1.0}), tmp_path / "old-nodes.jsonl.gz")
    return prior, nodes


def _flipped(data: bytes, at: int) -> bytes:
    """``data`` with 16 bytes from ``at`` inverted in part: no longer deflate's."""
    return data[:at] + bytes(byte ^ 0x5A for byte in data[at:at + 16]) + data[at + 16:]


@pytest.mark.parametrize("damage, error", [
    (lambda data: data[:len(data) // 2], "Compressed file ended before the end-of-stream marker was reached"),
    (lambda data: _flipped(data, len(data) // 3), "Error -3 while decompressing data"),
], ids=["cut short", "damaged inside"])
def test_a_prior_whose_nodes_are_cut_short_or_damaged_is_refused_in_one_line(tmp_path, capsys, damage, error):
    from harness import cli

    prior, nodes = _prior_beside_its_nodes(tmp_path)
    nodes.write_bytes(damage(nodes.read_bytes()))
    assert cli.main(["calibrate", "--prior", str(prior), "--out", str(tmp_path / "new"), "--workers", "0"]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"layoutbench: error: {nodes} holds no measurements written by `layoutbench calibrate "
                           f"--nodes` ({error}")


def test_a_budget_beyond_the_priors_programs_says_that_it_runs_them_all(tmp_path, capsys, monkeypatch):
    from harness import cli
    from harness.commands import fitting

    prior, _ = _prior_beside_its_nodes(tmp_path)
    swept = []
    monkeypatch.setattr(fitting, "sweep", lambda args, models, names, targets: swept.extend(models) or [])
    assert cli.main(["calibrate", "--prior", str(prior), "--budget", "10", "--out", str(tmp_path / "new"),
                     "--workers", "0"]) == 2  # nothing ran here: nothing to fit
    assert sorted(swept) == ["m0", "m1", "m2", "m3"]
    assert ("layoutbench: --budget 10 is more than the 4 programs the prior's nodes hold: running all 4"
            in capsys.readouterr().err.splitlines())


def test_fp16_chooses_among_the_priors_programs_that_have_a_half_precision_variant_and_runs_those(
        tmp_path, capsys, monkeypatch):
    """A float32 prior's models run as their ``.fp16`` variants; an int8 model has none and is
    not chosen; a model the prior measured in fp16 already is run as it is."""
    from costmodel.measurements import write_measurements
    from harness import cli
    from harness.commands import fitting

    names = {"m0": "m0", "m1": "m1.int8", "m2": "m2.fp16", "m3": "timm:m3"}
    device = _device({RELU: 1.0, GELU: 1.0})
    prior = tmp_path / "old.json"
    prior.write_bytes(_prior().to_bytes())
    write_measurements(Measurements(device.device, device.nodes.replace({"model": names, "graph": names}),
                                    device.programs.replace({"model": names})), tmp_path / "old-nodes.jsonl.gz")
    swept = []
    monkeypatch.setattr(fitting, "sweep", lambda args, models, names, targets: swept.extend(models) or [])
    command = ["calibrate", "--prior", str(prior), "--budget", "4", "--out", str(tmp_path / "new"), "--workers", "0"]
    assert cli.main([*command, "--fp16"]) == 2  # nothing ran here: nothing to fit
    assert sorted(swept) == ["m0.fp16", "m2.fp16", "timm:m3.fp16"]
    assert ("layoutbench: --budget 4 is more than the 3 programs the prior's nodes hold that have a .fp16 variant: "
            "running all 3" in capsys.readouterr().err.splitlines())
    swept.clear()
    assert cli.main(command) == 2
    assert sorted(swept) == ["m0", "m1.int8", "m2.fp16", "timm:m3"]  # without --fp16: the prior's programs as named
    assert cli.main(["calibrate", "--fit", str(tmp_path), "--prior", str(prior), "--fp16"]) == 2
    assert "--fp16 runs the .fp16 variants of the programs --prior chooses" in capsys.readouterr().err


def test_the_study_script_writes_its_scores_and_refuses_a_prior_without_its_nodes(tmp_path, capsys):
    from costmodel.measurements import write_measurements
    from costmodel.table import save

    prior, held_out, out = tmp_path / "old.json", tmp_path / "new-nodes.jsonl.gz", tmp_path / "study"
    save(_prior(), prior)
    write_measurements(_device({RELU: 1.0, GELU: 1.0}, models=3, nodes=20), tmp_path / "old-nodes.jsonl.gz")
    write_measurements(_device({RELU: 2.0, GELU: 8.0}, models=3, nodes=20, noise=0.05), held_out)
    argv = ["--prior", str(prior), "--held-out", str(held_out), "--out", str(out), "--budget", "1"]
    assert few_shot_study.main(argv) == 0
    study = pd.read_csv(out / "study.csv")
    assert list(study.columns) == ["budget", "method", "models", "median_error", "worst_error", "within_5",
                                   "within_10", "pairs_ordered", "kendall_tau"]
    assert study["budget"].fillna(0).tolist() == [1] * 5 + [0] * 4
    (tmp_path / "old-nodes.jsonl.gz").unlink()
    capsys.readouterr()
    assert few_shot_study.main(argv) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"few_shot_study: --prior {prior}: its measured nodes ({tmp_path / 'old-nodes.jsonl.gz'}) are not beside "
        "it; they say which programs the prior measured (calibrate --nodes keeps them)"]
