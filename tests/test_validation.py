"""calibrate --validate resumes: an interrupted validation fits only the held-out tables it
lacks, with the results of one from scratch; a table of other measurements or limits, or one
damaged, is fitted again, never read back."""

import random
import re

import pytest

from costmodel import gradient_boosted
from costmodel.measurements import read_measurements, write_measurements
from harness import cli
from harness.commands import fitting

from .test_gpu_time import NAMES, _measurements, _relu_ms

MODELS = ["m0", "m1", "m2"]
LIMITS = "maxImageDimension3D=2048,maxImageDimension2D=16384,maxStorageBufferRange=1073741824"


@pytest.fixture
def nodes(tmp_path, monkeypatch):
    """Three made-up models' measured nodes, as calibrate --nodes keeps them; fitted in 50
    rounds (what is tested is which tables are fitted, not how well)."""
    monkeypatch.setattr(gradient_boosted, "ROUNDS", 50)
    rng = random.Random(5)
    rows = [(model, f"relu{index}", "aten.relu.default", shape, NAMES[index % 2 * 3],
             _relu_ms(shape, NAMES[index % 2 * 3]) * (1 + number / 10))
            for number, model in enumerate(MODELS) for index, shape in
            enumerate((1, rng.randint(2, 64), rng.randint(2, 64), rng.randint(1, 64)) for _ in range(30))]
    return write_measurements(_measurements(rows), tmp_path / "nodes.jsonl.gz")


def _validate(nodes, out, capsys, *options) -> tuple[int, str, list[str]]:
    """The exit code, stderr and the models whose held-out tables were fitted."""
    code = cli.main(["calibrate", "--fit", str(nodes), "--validate", "--out", str(out), "--workers", "0", *options])
    err = capsys.readouterr().err
    return code, err, re.findall(r"table without (\S+):", err)


def test_an_interrupted_validation_resumes_fitting_only_the_tables_it_lacks(nodes, tmp_path, capsys, monkeypatch):
    scratch, out = tmp_path / "scratch", tmp_path / "resumed"
    code, err, fitted = _validate(nodes, scratch, capsys)
    assert code == 0 and fitted == MODELS
    assert "0 held-out tables kept (fitted from the same measurements by the same fit), 3 to fit" in err
    write_one = fitting.save
    written = []

    def interrupted_at_the_second_table(table, path):
        written.append(path)
        if len(written) == 2:
            raise KeyboardInterrupt  # Ctrl-C: the second fit is lost
        write_one(table, path)

    # (not the fit itself: the fit's code, patched, is other code, whose tables are not kept)
    monkeypatch.setattr(fitting, "save", interrupted_at_the_second_table)
    code, err, fitted = _validate(nodes, out, capsys)
    assert code == 130 and fitted == ["m0"]
    assert err.splitlines()[-1] == (f"layoutbench: interrupted; 1 of 3 held-out tables are in {out / 'held-out'}: "
                                    "the same command fits only the other 2")
    monkeypatch.setattr(fitting, "save", write_one)
    # a killed writer's temporary file, and a table damaged (calibrate writes whole tables or none)
    (out / "held-out" / ".m1.json.123.tmp").write_text('{"format": ')
    (out / "held-out" / "m2.json").write_bytes((scratch / "held-out" / "m2.json").read_bytes()[:1000])
    code, err, fitted = _validate(nodes, out, capsys)
    assert code == 0 and fitted == ["m1", "m2"]
    assert "1 held-out tables kept (fitted from the same measurements by the same fit), 2 to fit" in err
    assert f"3 held-out tables in {out / 'held-out'} (1 kept, 2 fitted)" in err
    assert (out / "validation.csv").read_bytes() == (scratch / "validation.csv").read_bytes()
    for table in (scratch / "held-out").iterdir():
        assert (out / "held-out" / table.name).read_bytes() == table.read_bytes(), table.name


def test_tables_of_other_measurements_or_limits_are_fitted_again(nodes, tmp_path, capsys):
    out = tmp_path / "out"
    assert _validate(nodes, out, capsys)[2] == MODELS
    assert _validate(nodes, out, capsys)[2] == [], "the same measurements and fit: every table kept"
    assert _validate(nodes, out, capsys, "--limits", LIMITS)[2] == MODELS
    changed = read_measurements(nodes)
    changed.nodes.loc[changed.nodes["model"] == "m2", "ms"] *= 1.01  # what no table without m2 was fitted from
    changed = write_measurements(changed, tmp_path / "changed.jsonl.gz")
    assert _validate(changed, out, capsys, "--limits", LIMITS)[2] == MODELS
    other = tmp_path / "other"  # a table renamed as another model's is not that model's
    (other / "held-out").mkdir(parents=True)
    for model, renamed in zip(MODELS, MODELS[1:] + MODELS[:1]):
        (other / "held-out" / f"{renamed}.json").write_bytes((out / "held-out" / f"{model}.json").read_bytes())
    assert _validate(changed, other, capsys, "--limits", LIMITS)[2] == MODELS
