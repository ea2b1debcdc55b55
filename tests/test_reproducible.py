"""Records of identical inputs are identical, byte for byte, but for what a clock or a memory
peak measured: whatever the hash seed, a predicted time sums its prices in one order, so it
rounds alike in every process."""

import json
import math
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from executorch.backends.vulkan.serialization.vulkan_graph_schema import VkMemoryLayout, VkStorageType

from costmodel.features import TRANSITION
from costmodel.table import CostTable
from harness.results.schema import METRICS
from harness.results.store import RecordStore
from strategies.assignment import Assignment
from strategies.layout_problem import LayoutProblem, Tensor, Use
from strategies.objective import PredictedTime

ROOT = Path(__file__).resolve().parent.parent
H100 = ROOT / "docs" / "cost-table" / "h100.json"
FULL_TIER_ONLY = "each test compares two processes of other hash seeds: 15-25 s in the fast tier's clean-clone run"

WIDTH = (VkStorageType.TEXTURE_3D, VkMemoryLayout.TENSOR_WIDTH_PACKED)
HEIGHT = (VkStorageType.TEXTURE_3D, VkMemoryLayout.TENSOR_HEIGHT_PACKED)


def _unclocked(record: dict) -> str:
    """A record as JSON without the fields a clock or a memory peak measured."""
    return json.dumps({field: value for field, value in record.items()
                       if field != "timestamp" and (field not in METRICS or METRICS[field].deterministic)})


@pytest.mark.slow
def test_records_of_identical_inputs_are_identical_whatever_the_hash_seed(tmp_path):
    """Every strategy, synthetic_small under the H100 table, in two processes of other hash seeds."""
    runs = []
    for seed in ("1", "2"):
        out = tmp_path / seed
        result = subprocess.run(
            [sys.executable, "-m", "harness.cli", "run", "--models", "synthetic_small", "--strategies", "all",
             "--costs", str(H100), "--out", str(out), "--fresh", "--workers", "0", "--format", "json"],
            env={**os.environ, "PYTHONHASHSEED": seed}, capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, result.stderr
        runs.append([_unclocked(record) for record in RecordStore(out).read()])
    assert all(json.loads(record)["predicted_gpu_ms"] for record in runs[0])
    assert runs[0] == runs[1]


def _clones() -> Assignment:
    """Tensors of many sizes, each read once in another representation than its own: a clone each."""
    rng = random.Random(0)
    tensors = {}
    for index in range(200):
        key = (f"x{index}", 0)
        shape = (1, rng.randint(1, 64), rng.randint(1, 64), rng.randint(1, 64))
        tensors[key] = Tensor(key, key[0], [WIDTH, HEIGHT], shape, 4)
    uses = [Use(f"reader{index}", 0, [key], [HEIGHT]) for index, key in enumerate(tensors)]
    return Assignment(LayoutProblem(tensors=tensors, uses=uses), dict.fromkeys(tensors, WIDTH), [HEIGHT] * len(uses))


class _SquareRoots:
    """A fitted model pricing a clone at the square root of its elements (µs): prices whose
    every bit counts, so that the order of a sum of them shows in its last bits."""

    def predict(self, queries):
        return np.sqrt([math.prod(query.signature["outputs"][0]) for query in queries]) * 1e-3


def priced_clones() -> list[str]:
    """Of :func:`_clones`' assignment: its predicted time, the part of it measured on its nodes
    and its cost to a time objective anchored on it, in hexadecimal (every bit)."""
    table = CostTable("gpu", _SquareRoots(), errors={TRANSITION: 0.1})
    assignment = _clones()
    prediction = assignment.prediction(table)
    cost = PredictedTime(assignment.problem, table, assignment).cost(assignment)
    return [value.hex() for value in (prediction.ms, prediction.measured_ms, cost)]


@pytest.mark.slow
def test_an_assignment_s_predicted_time_is_the_same_whatever_the_hash_seed():
    """Without lowering anything: a problem made by hand, priced in two processes of other hash seeds."""
    priced = [subprocess.run([sys.executable, "-c", "from tests.test_reproducible import priced_clones; "
                              "print(priced_clones())"], env={**os.environ, "PYTHONHASHSEED": seed}, cwd=ROOT,
                             capture_output=True, text=True, check=True, timeout=300).stdout for seed in ("1", "2")]
    assert priced[0] == priced[1]
