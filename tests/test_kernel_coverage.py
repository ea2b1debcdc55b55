"""The coverage command: per kernel family and representation, the catalog's predicted time and
the corpus's nodes and ranges, and the families flagged as unmeasured."""

from pathlib import Path

import pandas as pd

from costmodel.measurements import Measurements, NODE_COLUMNS, write_measurements
from costmodel.support import FEATURES, Support
from costmodel.table import load, save
from harness.cli import main
from harness.inspection.kernel_coverage import PricedNodesFile, catalog_nodes, coverage_table, measured

from .conftest import SMALL_MODEL
from .helpers.signatures import TEXTURE_C, TEXTURE_W, convolution, node

H100 = Path(__file__).parent.parent / "docs" / "cost-table" / "h100.json"
GROUPED_WIDE = convolution(256, 256, [3, 3], groups=2)  # 128 input channels a group
GROUPED_NARROW = convolution(64, 64, [3, 3], groups=8)  # 8 input channels a group
POINTWISE = convolution(64, 128, [1, 1])
GELU = node("aten.gelu.default", [{"t": [1, 196, 1536]}], [[1, 196, 1536]])


def priced(signature, ms, input_repr=TEXTURE_C, output_repr=TEXTURE_C, outside=None):
    return {"signature": signature, "input": input_repr, "output": output_repr, "transition": False, "ms": ms,
            "outside": outside}


def test_families_the_corpus_lacks_or_measured_only_elsewhere_are_flagged():
    catalog = pd.concat([
        measured([priced(GROUPED_WIDE, 0.9, outside="conv2d:grouped: log_serial 10.2 outside the measured 6.2-6.2"),
                  priced(POINTWISE, 0.1)]).assign(model="a"),
        measured([priced(POINTWISE, 1.0), priced(GELU, 0.005, TEXTURE_W, TEXTURE_W, outside="gelu never measured")]
                 ).assign(model="b"),
    ], ignore_index=True)
    corpus = measured([priced(GROUPED_NARROW, 0.1), priced(POINTWISE, 0.1), priced(convolution(32, 64, [1, 1]), 0.1)])
    table = coverage_table(catalog, corpus).set_index("family")
    assert table.loc["conv2d:grouped", "coverage"] == "outside"  # 128 channels a group against 8
    assert table.loc["conv2d:grouped", "max_model_share"] == table.loc["conv2d:grouped", "max_model_outside_share"] == 0.9
    assert table.loc["conv2d:grouped", "max_share_model"] == "a"
    assert table.loc["conv2d:pointwise", "coverage"] == "inside"
    assert table.loc["conv2d:pointwise", "corpus_nodes"] == 2
    assert table.loc["gelu", "coverage"] == "none"
    assert abs(table["share"].sum() - 1) < 1e-9
    assert table["flagged"].to_dict() == {"conv2d:grouped": True, "conv2d:pointwise": False, "gelu": False}


def test_priced_models_are_kept_and_read_back_and_uncached_ones_left_out(tmp_path, capsys):
    calls = []

    def price(model, strategy, table, cached_only):
        calls.append(model)
        return None if model == "uncached" else [priced(POINTWISE, 0.5)]

    class Table:
        digest = "t1"

    kept = PricedNodesFile(tmp_path / "coverage.nodes.jsonl")
    nodes, left_out = catalog_nodes(["a", "uncached"], "ilp", Table(), kept, cached_only=True, price=price)
    again, _ = catalog_nodes(["a"], "ilp", Table(), kept, price=price)
    assert calls == ["a", "uncached"] and left_out == ["uncached"]
    assert again.equals(nodes) and nodes["family"].tolist() == ["conv2d:pointwise"]
    assert "[2/2] uncached: no cached lowering prefix, left out" in capsys.readouterr().err


def test_coverage_command_on_a_small_model_and_a_hand_made_corpus(tmp_path, capsys):
    rows = [["m", "ilp", 0, 0, "g", "conv", "aten.convolution.default", False, TEXTURE_C, TEXTURE_C,
             convolution(8, 8, [3, 3], spatial=(8, 8)), 0.01, 3]]
    corpus = write_measurements(Measurements("a GPU", pd.DataFrame(rows, columns=NODE_COLUMNS),
                                             pd.DataFrame(columns=["run", "model", "strategy", "costs", "process_ms"])),
                                tmp_path / "corpus.jsonl.gz")
    costs = load(H100)  # its support: direct convolutions a thousand times larger; no other family
    costs.nodes = {}  # and none of the model's nodes priced as measured (it is a corpus model)
    costs.support = Support({"conv2d:direct": {feature: [40.0, 60.0] for feature in FEATURES}}, {"conv2d:direct": 1})
    save(costs, tmp_path / "costs.json")
    out = tmp_path / "coverage.csv"
    assert main(["coverage", "--catalog", "", "--models", SMALL_MODEL, "--costs", str(tmp_path / "costs.json"),
                 "--nodes", str(corpus), "--out", str(out)]) == 0
    table = pd.read_csv(out).set_index(["family", "representation"])
    convolutions = table.loc[("conv2d:direct", f"{TEXTURE_C} -> {TEXTURE_C}")]
    # the corpus file measured this very convolution, but the support, which records use, decides
    assert convolutions["corpus_nodes"] == 1 and convolutions["coverage"] == "outside" and convolutions["flagged"]
    others = table.drop(index="conv2d:direct", level="family")
    assert (others["coverage"] == "none").all() and (table["outside_share"] == table["share"]).all()
    assert table["flagged"].equals(table["max_model_outside_share"] >= 0.01)
    assert "conv2d:direct" in capsys.readouterr().out
    assert (tmp_path / "coverage.nodes.jsonl").exists()


def test_coverage_command_refuses_a_table_without_a_support(tmp_path, capsys):
    costs = load(H100)
    costs.support = None
    save(costs, tmp_path / "costs.json")
    assert main(["coverage", "--catalog", "", "--costs", str(tmp_path / "costs.json"),
                 "--nodes", str(H100.with_name("h100-nodes.jsonl.gz")), "--out", str(tmp_path / "c.csv")]) == 2
    assert "states no support" in capsys.readouterr().err


def test_coverage_command_refuses_a_catalog_without_its_columns(tmp_path, capsys):
    catalog = tmp_path / "catalog.csv"
    catalog.write_text("model,family\ntimm:resnet18,resnet\n")
    assert main(["coverage", "--catalog", str(catalog), "--costs", str(H100), "--out", str(tmp_path / "c.csv")]) == 2
    assert "is no catalog CSV with columns model and 'runs on ET-VK (lavapipe)'" in capsys.readouterr().err
