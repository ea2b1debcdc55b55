"""``layoutbench preferences``: a cost table's rules, read off its probes priced by its fit,
are the ones its prices imply; several tables print side by side; a file that is not a
table, or a table with no probes, is one line and exit 2."""

import json

from costmodel.per_operator import PerOperatorModel
from costmodel.table import CostTable
from harness import cli
from costmodel.preferences import preferences

TEXTURE_W, TEXTURE_C, BUFFER_W = "TEXTURE_3D/WIDTH_PACKED", "TEXTURE_3D/CHANNELS_PACKED", "BUFFER/WIDTH_PACKED"
LINEAR, CONVOLUTION, ADD = "aten.linear.default", "aten.convolution.default", "aten.add.Tensor"


def _probe(operator: str, inputs: list[list[int]], output: list[int], pairs: list[str]) -> dict:
    signature = {"operator": operator, "args": [{"t": shape} for shape in inputs], "kwargs": {}, "outputs": [output],
                 "dtype": "float32"}
    return {"signature": signature, "pairs": [[name, name] for name in pairs], "load": {"weight_bytes": 1 << 20, "largest_activation": 1 << 16}}


def _linear_probes() -> list[dict]:
    """Linears of 64 rows contracting as many columns as they write: 2048 to 65536 outputs."""
    return [_probe(LINEAR, [[64, size]], [64, size], [TEXTURE_W, BUFFER_W]) for size in (32, 64, 256, 1024)]


def _table(device: str, lines: dict, probes: dict, error: float = 0.1) -> CostTable:
    return CostTable(device, PerOperatorModel(lines), errors=dict.fromkeys(probes, error), probes=probes,
                     corpus={"models": ["a", "b"]}).identified()


def _h100_like() -> CostTable:
    """Linear: texture 2 ns an output, buffer 10 us + 1 ns an output (cheaper from 10000 outputs,
    by more than the 10 % error from 16384); convolution: channels-packed texture half the price
    of width-packed; add: buffer 5 % cheaper, within the error."""
    lines = {(LINEAR, TEXTURE_W, TEXTURE_W): (0.0, 2.0), (LINEAR, BUFFER_W, BUFFER_W): (0.01, 1.0),
             (CONVOLUTION, TEXTURE_W, TEXTURE_W): (0.0, 2.0), (CONVOLUTION, TEXTURE_C, TEXTURE_C): (0.0, 1.0),
             (ADD, TEXTURE_W, TEXTURE_W): (0.0, 1.0), (ADD, BUFFER_W, BUFFER_W): (0.0, 0.95)}
    convolutions = [_probe(CONVOLUTION, [[1, channels, 16, 16]], [1, channels, 16, 16], [TEXTURE_W, TEXTURE_C])
                    for channels in (8, 32, 128)]
    adds = [_probe(ADD, [[1, 64, size], [1, 64, size]], [1, 64, size], [TEXTURE_W, BUFFER_W]) for size in (16, 64)]
    return _table("h100-like", lines, {LINEAR: _linear_probes(), CONVOLUTION: convolutions, ADD: adds})


def _lavapipe_like() -> CostTable:
    """Linear: texture cheaper everywhere; no convolution probed."""
    lines = {(LINEAR, TEXTURE_W, TEXTURE_W): (0.0, 1.0), (LINEAR, BUFFER_W, BUFFER_W): (0.0, 3.0)}
    return _table("lavapipe-like", lines, {LINEAR: _linear_probes()})


def _rules(table: CostTable) -> dict:
    return {rule.operator: rule.rule for rule in preferences(table)}


def test_the_rules_are_the_ones_the_prices_imply():
    rules = _rules(_h100_like())
    # 16384 outputs: 0.0328 ms in texture, 0.0264 in buffer (19.5 % less); 65536: 42.4 % less; median 31 %.
    assert rules[LINEAR] == ("width-packed buffer (saves 31%) when contracted dim >= 256, else no clear preference; "
                             "4 of 4 probes agree")
    assert rules[CONVOLUTION] == "channels-packed texture (saves 50%); 3 of 3 probes agree"
    assert rules[ADD] == "no clear preference; 2 of 2 probes agree"
    linear = next(rule for rule in preferences(_h100_like()) if rule.operator == LINEAR)
    assert linear.executorch == (TEXTURE_W, TEXTURE_W)  # ExecuTorch's pass picks texture, then width-packed


def test_a_saving_within_the_error_is_no_clear_preference():
    table = _h100_like()
    table.errors[CONVOLUTION] = 0.6  # the 50 % saving is now within what the table expects to miss
    assert _rules(table)[CONVOLUTION] == "no clear preference; 3 of 3 probes agree"


def test_one_table_prints_its_rules_and_two_print_side_by_side(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")  # no cell wraps: a rule is found whole on its row
    h100, lavapipe = tmp_path / "h100.json", tmp_path / "lavapipe.json"
    h100.write_bytes(_h100_like().to_bytes())
    lavapipe.write_bytes(_lavapipe_like().to_bytes())

    assert cli.main(["preferences", str(h100)]) == 0
    text = capsys.readouterr().out
    assert "h100-like" in text and "channels-packed texture (saves 50%); 3 of 3 probes agree" in text

    assert cli.main(["preferences", str(h100), str(lavapipe)]) == 0
    rows = capsys.readouterr().out.splitlines()
    header = next(row for row in rows if "h100-like" in row)
    assert header.index("h100-like") < header.index("lavapipe-like")
    [linear] = [row for row in rows if LINEAR in row]
    assert linear.index("width-packed buffer (saves 31%) when contracted dim >= 256") < linear.index(
        "no clear preference; 4 of 4 probes agree")
    [convolution] = [row for row in rows if CONVOLUTION in row]
    assert convolution.index("channels-packed texture (saves 50%)") < convolution.index("not probed")

    assert cli.main(["preferences", str(h100), str(lavapipe), "--format", "json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert [t["device"] for t in printed] == ["h100-like", "lavapipe-like"]
    linear_rule = next(o for o in printed[0]["operators"] if o["operator"] == LINEAR)
    assert linear_rule["prefers"] == [BUFFER_W, BUFFER_W] and linear_rule["otherwise"] is None
    assert linear_rule["split"] == {"feature": "log_contracted", "at_least": 8.0}


def test_a_file_that_is_not_a_table_or_a_table_without_probes_is_one_line(tmp_path, capsys):
    not_a_table, no_probes = tmp_path / "results.json", tmp_path / "old.json"
    not_a_table.write_text('{"records": []}')
    table = _lavapipe_like()
    table.probes = {}
    no_probes.write_bytes(table.identified().to_bytes())
    for path, says in ((not_a_table, "is not a cost table"), (no_probes, "has no probes"),
                       (tmp_path / "missing.json", "does not exist"), (tmp_path, "is a directory: name the table's")):
        assert cli.main(["preferences", str(path)]) == 2
        captured = capsys.readouterr()
        assert captured.out == ""
        [line] = captured.err.splitlines()
        assert says in line and str(path) in line


def test_a_tie_is_executorch_s_pick():
    lines = {(LINEAR, TEXTURE_W, TEXTURE_W): (0.0, 1.0), (LINEAR, BUFFER_W, BUFFER_W): (0.0, 1.0)}
    probes = {LINEAR: [_probe(LINEAR, [[64, 64]], [64, 64], [BUFFER_W, TEXTURE_W])]}  # buffer seen first
    [rule] = preferences(_table("tied", lines, probes))
    assert rule.fastest == ((TEXTURE_W, TEXTURE_W), 1)
    assert rule.fastest_text == "width-packed texture in 1 of 1 (ExecuTorch's pick)"
