"""GPU time: ilp-time is the optimum of the time it predicts (equal to exhaustive search on
small graphs, never above another strategy under one table), every Vulkan record predicts
its time under the table in force, calibration rounds cover new representations, and the
fitted model prices what it measured."""

import json
import random

import pandas as pd
import pytest

import strategies
from harness.inspection import costs
from harness.pipeline.model import pipeline
from harness.targets.vulkan.prefix import vulkan_lowering
from harness.sweep.planning import run_sweep
from harness.sweep.execution import Execution
from harness.results.store import RecordStore
from harness.targets.vulkan import metrics, validator
from harness.targets.vulkan.dispatches import node_map
from strategies.calibration import round_name
from strategies.gpu_costs import COSTS_ENV, CostTable, LinearCost, pair_name
from strategies.ilp import partition_problems, solve
from strategies.layout_problem import extract, read_assignment

from .helpers import exhaustive

RANDOM_GRAPHS = [f"synthetic:{6 + seed % 5}:{seed}" for seed in range(12)]
NAMES = [f"{storage}/{layout}" for storage in ("TEXTURE_3D", "BUFFER")
         for layout in ("WIDTH_PACKED", "HEIGHT_PACKED", "CHANNELS_PACKED")]
COMPARED = ("bfs-downstream", "bfs-refined", "dfs-upstream", "all-width-packed", "ilp", "ilp-bytes")


def random_table(operators, seed: int, names=tuple(NAMES)) -> CostTable:
    """A table pricing every operator in every pair of representations (``names``), at random."""
    rng = random.Random(seed)
    return CostTable(
        "synthetic",
        operators={(op, a, b): LinearCost(rng.uniform(0, 0.01), rng.uniform(0, 2))
                   for op in sorted(operators) for a in ["", *names] for b in names},
        transitions={(a, b): LinearCost(rng.uniform(0, 0.01), rng.uniform(0, 0.5))
                     for a in names for b in names if a != b},
    )


def operators_of(problems) -> set:
    return {info.operator for problem in problems for info in problem.operators.values()}


@pytest.fixture
def table_file(tmp_path, monkeypatch):
    """Writes a table and puts it in force, as --costs does."""

    def write(table: CostTable):
        path = tmp_path / f"costs-{random.random()}.json"
        path.write_text(json.dumps(table.to_json()))
        monkeypatch.setenv(COSTS_ENV, str(path))
        return path

    return write


def test_ilp_time_equals_exhaustive_search_under_random_tables():
    for seed, name in enumerate(RANDOM_GRAPHS):
        for problem in partition_problems(vulkan_lowering(pipeline(name)).programs):
            table = random_table(operators_of([problem]), seed)
            solution = solve(problem, "time", table=table)
            assert solution.optimal, name
            assert solution.cost == pytest.approx(exhaustive.optimum(problem, "time", table), abs=1e-6), name
            assert solution.bound <= solution.cost + 1e-6


@pytest.mark.parametrize("model", ["synthetic_small", "synthetic:40:3"])
def test_ilp_time_is_never_above_another_strategy_and_records_what_it_predicts(model, table_file):
    lowering = vulkan_lowering(pipeline(model))
    table = random_table(operators_of(partition_problems(lowering.programs)), 7)
    table_file(table)
    predicted = {}
    for name in (*COMPARED, "ilp-time"):
        lowered = lowering.lower(strategies.get_strategy(name))
        validator.validate(lowered)
        predicted[name], unpriced = metrics.predicted_gpu_ms(lowered, table)
        assert unpriced == 0
    summary = strategies.summarize(strategies.get_strategy("ilp-time"),
                                   [p.layout_pass for p in lowered.partitions])
    assert summary["optimal"] is True
    assert summary["objective"] == pytest.approx(predicted["ilp-time"])
    for name in COMPARED:
        assert predicted["ilp-time"] <= predicted[name] + 1e-9, name
    assert min(predicted[name] for name in COMPARED) > predicted["ilp-time"], "the table must make time matter"


def test_without_a_table_ilp_time_is_skipped_saying_how_to_get_one(tmp_path, monkeypatch):
    monkeypatch.delenv(COSTS_ENV, raising=False)
    sweep = run_sweep(["synthetic_small"], ["ilp-time", "ilp"], "vulkan", RecordStore(tmp_path),
                      execution=Execution(workers=0))
    records = {r["strategy"]: r for r in sweep.records}
    assert records["ilp"]["status"] == "ok" and records["ilp"]["predicted_gpu_ms"] is None
    assert records["ilp-time"]["status"] == "skipped"
    assert "--costs FILE" in records["ilp-time"]["reason"] and "layoutbench calibrate" in records["ilp-time"]["reason"]


def test_the_table_is_part_of_the_identity(tmp_path, table_file):
    operators = operators_of(partition_problems(vulkan_lowering(pipeline("synthetic_small")).programs))
    store = RecordStore(tmp_path)
    table_file(random_table(operators, 1))
    # The record cache outlives a test: the first sweep measures regardless of it.
    first = run_sweep(["synthetic_small"], ["ilp-time"], "vulkan", store, fresh=True, execution=Execution(workers=0))
    again = run_sweep(["synthetic_small"], ["ilp-time"], "vulkan", store, execution=Execution(workers=0))
    table_file(random_table(operators, 2))
    other = run_sweep(["synthetic_small"], ["ilp-time"], "vulkan", store, execution=Execution(workers=0))
    assert len(first.measured) == 1 and len(again.reused) == 1
    assert again.records[0]["identity"] == first.records[0]["identity"]
    assert other.records[0]["identity"] != first.records[0]["identity"]  # not the first table's record
    assert first.records[0]["predicted_gpu_ms"] != other.records[0]["predicted_gpu_ms"]
    assert first.records[0]["environment"]["gpu_costs"] != other.records[0]["environment"]["gpu_costs"]


def test_calibration_rounds_put_nodes_in_new_representations():
    lowering = vulkan_lowering(pipeline("synthetic_small"))
    seen: list[set] = []
    for number in (1, 2, 3):
        lowered = lowering.lower(strategies.get_strategy(round_name(number)))
        validator.validate(lowered)
        seen.append({(n["node"], (n["inputs"] or [""])[0], n["output"])
                     for p in node_map(lowered)["partitions"] for n in p["nodes"] if not n["transition"]})
    assert seen[1] - seen[0] and seen[2] - seen[0] - seen[1]
    assert "calibration-1" not in strategies.list_strategies()


def test_node_maps_name_nodes_as_the_cost_table_prices_them():
    """The fit reads (graph, node, input, output) off node maps; ilp-time and
    predicted_gpu_ms price the layout problem: both must name every node the same way."""
    lowering = vulkan_lowering(pipeline("synthetic_small"))
    for name in ("bfs-downstream", round_name(2)):
        lowered = lowering.lower(strategies.get_strategy(name))
        nodes = [(p["graph"], n) for p in node_map(lowered)["partitions"] for n in p["nodes"] if not n["transition"]]
        # Prepacking runs once, at load: no layout choice, no time per inference.
        mapped = {(graph, n["node"], (n["inputs"] or [""])[0], n["output"]) for graph, n in nodes
                  if "prepack" not in n["operator"]}
        priced = set()
        for partition in lowered.partitions:
            graph_module = partition.program.graph_module
            inserted = frozenset(n.name for n in graph_module.graph.nodes
                                 if metrics.is_transition(n, partition.prefix_node_names))
            problem = extract(partition.layout_pass, graph_module, inserted)
            tensor_reprs, use_reprs = read_assignment(problem, graph_module)
            for op, primary, output in problem.operator_reprs(tensor_reprs, use_reprs):
                priced.add((problem.graph, op, pair_name(primary) if primary else "", pair_name(output)))
        assert priced == mapped, name


def test_the_fit_recovers_fixed_and_per_element_costs(monkeypatch):
    rows = []
    for program in ("s0", "s1"):
        for index, elements in enumerate((1000, 4000, 16000)):
            rows.append({"graph": "g", "node": f"relu{index}", "operator": "aten.relu.default", "transition": False,
                         "inputs": "TEXTURE_3D/WIDTH_PACKED", "output": "TEXTURE_3D/WIDTH_PACKED",
                         "elements": elements, "bytes": 4 * elements, "gpu_ms": 0.002 + 0.5e-6 * elements})
            rows.append({"graph": "g", "node": f"clone{index}", "operator": "aten.clone.default", "transition": True,
                         "inputs": "TEXTURE_3D/WIDTH_PACKED", "output": "BUFFER/WIDTH_PACKED",
                         "elements": elements, "bytes": 4 * elements, "gpu_ms": 0.005 + 0.1e-6 * 4 * elements})
        rows.append({"graph": "g", "node": "nchw_to_image", "operator": "staging", "transition": False, "inputs": "",
                     "output": None, "elements": 0, "bytes": 0, "gpu_ms": 1.0})
        for row in rows[-7:]:
            row["strategy"] = program
    frame = pd.DataFrame(rows).assign(model="m", device="gpu")
    monkeypatch.setattr(costs, "run_dispatches", lambda directory, chosen=None: frame)
    table = costs.fit_cost_model(["run"])
    fitted = table.operators[("aten.relu.default", "TEXTURE_3D/WIDTH_PACKED", "TEXTURE_3D/WIDTH_PACKED")]
    assert fitted.fixed_ms == pytest.approx(0.002) and fitted.ns_per_unit == pytest.approx(0.5)
    transition = table.transitions[("TEXTURE_3D/WIDTH_PACKED", "BUFFER/WIDTH_PACKED")]
    assert transition.fixed_ms == pytest.approx(0.005) and transition.ns_per_unit == pytest.approx(0.1)
    assert table.node_ms("g", "relu1", "aten.relu.default", "TEXTURE_3D/WIDTH_PACKED", "TEXTURE_3D/WIDTH_PACKED",
                         4000) == pytest.approx(0.004)
    assert "staging" not in table.pooled
    # Unmeasured representations of a measured operator: priced by the operator's pooled fit,
    # and on a node measured in other pairs, no lower than its slowest measured one.
    assert table.node_ms("h", "x", "aten.relu.default", "BUFFER/WIDTH_PACKED", "BUFFER/WIDTH_PACKED",
                         2000) == pytest.approx(0.003)
    assert table.node_ms("g", "relu1", "aten.relu.default", "BUFFER/WIDTH_PACKED", "BUFFER/WIDTH_PACKED",
                         2000) == pytest.approx(0.004)
    assert table.node_ms("h", "x", "aten.gelu.default", "", "BUFFER/WIDTH_PACKED", 2000) is None
    assert CostTable.from_json(json.loads(json.dumps(table.to_json()))).to_json() == table.to_json()


def test_a_fit_from_one_size_keeps_the_dispatch_s_fixed_cost():
    """One transition of one size: its time is mostly the dispatch, not its bytes; the cost
    per byte comes from all transitions, so a larger tensor is not priced by that ratio."""
    prior = LinearCost(0.005, 0.001)
    one_size = costs._fit(pd.Series([4096, 4096]), pd.Series([0.006, 0.006]), prior)
    assert one_size.ns_per_unit == pytest.approx(0.001) and one_size.fixed_ms == pytest.approx(0.006 - 0.001 * 4096e-6)
    assert one_size.ms(4096 * 1000) < 0.02
    assert costs._fit(pd.Series([4096]), pd.Series([0.006])).fixed_ms == 0.0  # no prior: all per unit
