"""The ``.fp16`` variant: the model as it is, computed by ET-VK in half precision."""

import pytest

import models
from harness.errors import UnknownNameError
from harness.results.store import RecordStore
from harness.sweep.execution import Execution
from harness.sweep.planning import run_sweep
from harness.targets import MeasureContext


def test_a_half_precision_variant_is_its_model_with_half_the_delegate_s_memory(tmp_path):
    assert models.half_precision("synthetic_small.fp16") and not models.half_precision("synthetic_small")
    half, full = models.create("synthetic_small.fp16"), models.create("synthetic_small")
    assert half.name == "synthetic_small.fp16" and half.input_shapes == full.input_shapes
    assert all((a == b).all() for a, b in zip(half.module.state_dict().values(), full.module.state_dict().values()))
    done = run_sweep(["synthetic_small", "synthetic_small.fp16"], ["bfs-downstream"], ["vulkan"],
                     RecordStore(tmp_path), context=MeasureContext(tmp_path), execution=Execution(workers=0))
    by_model = {record["model"]: record for record in done.records}
    assert [by_model[m]["status"] for m in by_model] == ["ok", "ok"]
    assert by_model["synthetic_small.fp16"]["precision"] == "float16"
    assert by_model["synthetic_small"]["precision"] == "float32"
    # the same layouts, each tensor in two bytes an element instead of four
    assert by_model["synthetic_small.fp16"]["transitions"] == by_model["synthetic_small"]["transitions"]
    assert by_model["synthetic_small.fp16"]["delegate_memory_bytes"] * 2 == by_model["synthetic_small"][
        "delegate_memory_bytes"]


def test_the_half_precision_corpus_is_the_float_corpus():
    corpus, half = models.list_models(zoo="calibration"), models.list_models(zoo="calibration-fp16")
    assert sorted(half) == sorted(name + ".fp16" for name in corpus if not name.endswith(".int8"))
    with pytest.raises(UnknownNameError):  # int8 or half precision, not both
        models.create("resnet18.int8.fp16")
