"""A record's interval means what it says: the interval a table states of a program is the one
its record carries, and leaving one model out, programs' measured times lie within the
intervals their held-out tables state about as often as the level they name."""

import math
import random

import pandas as pd

from costmodel import gradient_boosted
from costmodel.intervals import Bounds, Intervals
from costmodel.measurements import Measurements, read_measurements, write_measurements
from costmodel.prediction import Prediction
from costmodel.queries import Price, Query
from costmodel.support import Support
from costmodel.table import load
from harness import cli
from harness.inspection import validation

from .test_gpu_time import NAMES, _measurements, _relu_ms

OPERATORS = ("aten.relu.default", "aten.sigmoid.default", "aten.hardswish.default")


def _query(operator: str, shape: list) -> Query:
    return Query({"operator": operator, "args": [{"t": shape}], "kwargs": {}, "outputs": [shape], "dtype": "float32"},
                 NAMES[0], NAMES[0], graph="g", node=operator)


def test_a_programs_interval_is_the_one_its_record_states():
    """Nodes of a family never measured, or far larger than those measured, are outside the
    support and stated within their family's worst; measured nodes never are."""
    measured = pd.DataFrame([{"family": "relu", "log_work": w, "log_output_elements": w, "log_serial": 0.0}
                             for w in (10.0, 12.0)])
    support = Support.of(measured)
    intervals = Intervals.of([-0.1, 0.0, 0.1] * 5, [], {"relu": [0.3], "sigmoid": [-0.9]})
    queries = [_query("aten.relu.default", [1, 1, 32, 64]), _query("aten.relu.default", [1, 64, 256, 256]),
               _query("aten.sigmoid.default", [1, 1, 32, 64]), _query("aten.sigmoid.default", [1, 1, 32, 64])]
    prices = [Price(1.0, False, 0.0), Price(2.0, False, 0.0), Price(3.0, False, 0.0), Price(4.0, True, 0.0)]
    prediction = Prediction.of(queries, prices, support)
    assert prediction.outside == {"relu": 2.0, "sigmoid": 3.0} and prediction.measured_ms == 4.0
    low, high = prediction.interval(intervals)
    inside_low, inside_high = Bounds.conformal([-0.1, 0.0, 0.1] * 5).of(5.0)
    assert low == inside_low + 2.0 * math.exp(-0.3) + 3.0 * math.exp(-0.9)
    assert high == inside_high + 2.0 * math.exp(0.3) + 3.0 * math.exp(0.9)
    assert Prediction.of(queries, prices).outside == {}  # a table without a support states none


def _deviating_models(models: int, nodes: int, spread: float, seed: int) -> Measurements:
    """Models whose nodes follow one shape dependence per operator, each model's nodes of an
    operator off it by one factor of its own (log-normal, ``spread``): what a fit cannot learn
    from other models, as a real model's kernels differ from the corpus's."""
    rng = random.Random(seed)
    rows = []
    for model in range(models):
        factor = {operator: math.exp(rng.gauss(0, spread)) for operator in OPERATORS}
        for index in range(nodes):
            operator = OPERATORS[index % len(OPERATORS)]
            shape = (1, rng.randint(2, 64), rng.randint(2, 64), rng.randint(1, 64))
            pair = NAMES[index % 2 * 3]
            ms = _relu_ms(shape, pair) * (1 + OPERATORS.index(operator)) * factor[operator]
            rows.append((f"m{model:02d}", f"n{index}", operator, shape, pair, ms))
    return _measurements(rows)


def test_leaving_one_model_out_the_interval_holds_at_its_level(tmp_path, capsys, monkeypatch):
    """calibrate --validate states each program's interval (validation.csv) and how often the
    programs' measured times lie within it; on models that differ from each other by a
    log-normal factor per operator, about as often as its level says: 80 %, here within 20
    points (a binomial share of 16 programs), where the old median error held for half."""
    monkeypatch.setattr(gradient_boosted, "ROUNDS", 50)  # trees enough for three operators' shapes
    nodes = write_measurements(_deviating_models(16, 18, 0.1, 0), tmp_path / "nodes.jsonl.gz")
    assert cli.main(["calibrate", "--fit", str(nodes), "--validate", "--out", str(tmp_path / "lomo"),
                     "--workers", "0"]) == 0
    programs = pd.read_csv(tmp_path / "lomo" / "validation.csv")
    assert (programs["predicted_low_ms"] < programs["predicted_high_ms"]).all()
    within = validation.within_interval(validation.strategy_programs(programs))
    assert abs(within.mean() - 0.8) <= 0.2, within
    assert validation.interval_line(validation.strategy_programs(programs), 0.8) in capsys.readouterr().err


def test_runs_of_a_device_that_runs_et_vk_alike_stand_in_only_when_named(tmp_path, capsys, monkeypatch):
    """An H200's runs of new models fold into an H100's corpus only under --as-device, and the
    table's corpus names both devices."""
    monkeypatch.setattr(gradient_boosted, "ROUNDS", 5)
    h100, h200 = _deviating_models(3, 6, 0.1, 1), _deviating_models(2, 6, 0.1, 2)
    h200.device = "h200"
    for frame in (h200.nodes, h200.programs):
        frame["model"] = "new-" + frame["model"]
    files = [str(write_measurements(m, tmp_path / f"{name}.jsonl.gz")) for name, m in (("h100", h100), ("h200", h200))]
    assert cli.main(["calibrate", "--fit", *files, "--out", str(tmp_path / "refused")]) == 2
    assert "a cost table is of one device; these runs are of gpu, h200" in capsys.readouterr().err
    table = tmp_path / "table.json"
    assert cli.main(["calibrate", "--fit", *files, "--as-device", "gpu", "--table", str(table),
                     "--nodes", str(tmp_path / "kept.jsonl.gz")]) == 0
    fitted = load(table)
    assert fitted.device == "gpu" and fitted.corpus["measured_on"] == ["gpu", "h200"]
    assert len(fitted.corpus["models"]) == 5
    assert read_measurements(tmp_path / "kept.jsonl.gz").measured_on == ("gpu", "h200")
