"""The ``.int8`` variant: names, identity, precision, int8 transitions and their bytes, every
strategy's assignment validated (ilp-time's too), vulkan-run's int8 tolerance, and factories
that return exported or quantized modules."""


import executorch.backends.vulkan.utils as vk_utils
import pytest
import torch
from executorch.backends.vulkan.serialization.vulkan_graph_schema import VkMemoryLayout, VkStorageType

from costmodel.queries import pair_name
from harness.errors import InvalidAssignmentError, InvalidModelError, UnknownNameError
from harness.pipeline.export_cache import export_model
from harness.pipeline.model import pipeline
from harness.results.store import RecordStore
from harness.sweep.execution import Execution
from harness.sweep.planning import run_sweep
from harness.targets import MeasureContext
from harness.targets.accuracy import tolerance
from harness.targets.vulkan.compile import metrics, validator
from harness.targets.vulkan.compile.prefix import vulkan_lowering
from harness.targets.vulkan.local import runners
from harness.targets.vulkan.targets import lower_and_count
import models
from models.quantization import is_quantized
import strategies
from strategies.ilp import partition_problems
from strategies.representations import tensor_bytes

from .conftest import QUICK_ZOO
from .test_gpu_time import NAMES, operators_of, random_table
from .helpers.user_models import tiny_convnet

MODEL = "synthetic_small.int8"
HEURISTICS = ("bfs-downstream", "bfs-refined", "dfs-upstream", "all-width-packed")


def test_int8_names_resolve_and_are_their_own_identity():
    assert models.list_models(zoo="quick-int8") == sorted(f"{name}.int8" for name in QUICK_ZOO)
    assert models.resolve_models("synthetic_sm*.int8") == [MODEL]
    assert models.resolve_models("timm:resnet18*.unfused.int8") == ["timm:resnet18.unfused.int8",
                                                                     "timm:resnet18d.unfused.int8"]
    assert models.source_digest(MODEL) != models.source_digest("synthetic_small")
    with pytest.raises(UnknownNameError, match=r"<name>\.int8"):
        models.resolve_models("synthetic_small.int8.unfused")  # variants go in one order


@pytest.mark.slow
def test_int8_model_is_quantized_the_same_every_time():
    first, second = models.create(MODEL), models.create(MODEL)
    assert first.name == MODEL and is_quantized(first.module)
    assert not is_quantized(models.create("synthetic_small").module)
    with torch.no_grad():
        torch.testing.assert_close(first.module(*first.example_inputs), second.module(*second.example_inputs),
                                   rtol=0, atol=0)


def test_packed_int8_layouts_are_sized_as_the_runtime_pads_them():
    # Tensor.cpp: 4W4C aligns C and W to 4 (a 2-D tensor's C of 1 too); 4W aligns W to 4 in
    # a buffer, 16 in a texture; one byte an element.
    assert tensor_bytes([1, 3, 5, 7], 1, VkStorageType.BUFFER, VkMemoryLayout.PACKED_INT8_4W4C) == 4 * 5 * 8
    assert tensor_bytes([5, 7], 1, VkStorageType.BUFFER, VkMemoryLayout.PACKED_INT8_4W4C) == 4 * 5 * 8
    assert tensor_bytes([1, 3, 5, 7], 1, VkStorageType.BUFFER, VkMemoryLayout.PACKED_INT8_4W) == 3 * 5 * 8
    assert tensor_bytes([1, 3, 5, 7], 1, VkStorageType.TEXTURE_3D, VkMemoryLayout.PACKED_INT8_4W) == 3 * 5 * 16
    assert tensor_bytes([1, 6, 5, 7], 1, VkStorageType.BUFFER, VkMemoryLayout.PACKED_INT8_4H4W) == 6 * 8 * 8


@pytest.mark.slow
def test_every_strategy_is_valid_on_int8_and_the_ilp_never_above_a_heuristic():
    lowering = vulkan_lowering(pipeline(MODEL))
    records = {}
    for name in (*HEURISTICS, "ilp", "ilp-bytes"):
        fields = {}
        lowered, _ = lower_and_count(lowering, name, fields, None)  # validates, raises on a violation
        assert validator.validate(lowered) > 0
        records[name] = fields
    for name, fields in records.items():
        assert fields["precision"] == "int8", name
        assert 0 <= fields["int8_transitions"] <= fields["transitions"], name
        assert fields["int8_transition_bytes"] <= fields["transition_bytes"], name
        assert records["ilp"]["transitions"] <= fields["transitions"], name
        assert records["ilp-bytes"]["transition_bytes"] <= fields["transition_bytes"], name
    # the ILP's byte objective is the metric, at int8 sizes
    assert records["ilp-bytes"]["objective"] == records["ilp-bytes"]["transition_bytes"]
    # all-width-packed forces int8 tensors out of their PACKED_INT8 layouts, and float ones around them
    widths = records["all-width-packed"]
    assert 0 < widths["int8_transitions"] < widths["transitions"]
    assert 0 < widths["int8_transition_bytes"] < widths["transition_bytes"]


def test_ilp_time_on_int8_is_valid_and_never_above_another_strategy():
    lowering = vulkan_lowering(pipeline(MODEL))
    int8_names = [pair_name((VkStorageType.BUFFER, layout)) for layout in sorted(vk_utils.all_quantized_memory_layouts)]
    table = random_table(operators_of(partition_problems(lowering.programs)), 7, (*NAMES, *int8_names))
    predicted = {}
    for name in (*HEURISTICS, "ilp", "ilp-bytes", "ilp-time"):
        lowered = lowering.lower(strategies.get_strategy(name), table)
        validator.validate(lowered)
        predicted[name] = metrics.predicted_gpu_time(lowered, table)["predicted_gpu_ms"]
    for name, ms in predicted.items():
        assert predicted["ilp-time"] <= ms + 1e-9, name


def test_float_records_say_float32_with_no_int8_transitions():
    fields = {}
    lower_and_count(vulkan_lowering(pipeline("synthetic_small")), "all-width-packed", fields, None)
    assert fields["precision"] == "float32"
    assert fields["transitions"] > 0 and fields["int8_transitions"] == 0 == fields["int8_transition_bytes"]


def test_validator_rejects_an_int8_tensor_outside_its_packed_int8_layout():
    lowered = vulkan_lowering(pipeline(MODEL)).lower(strategies.get_strategy("tests.helpers.user_strategies:Int8AsWidthPacked"))
    with pytest.raises(InvalidAssignmentError, match=r"got BUFFER/WIDTH_PACKED, accepts .*PACKED_INT8"):
        validator.validate(lowered)


@pytest.mark.parametrize("factory", ["tests.helpers.user_models:quantized_tiny_convnet",
                                     "tests.helpers.user_models:exported_tiny_convnet"])
def test_a_factory_may_return_an_exported_or_quantized_module(factory):
    spec = models.create(factory)
    exported = export_model(spec)
    assert any(n.op == "call_function" for n in exported.graph.nodes)
    assert is_quantized(spec.module) == ("quantized" in factory)


def test_a_saved_program_quantizes_as_int8(tmp_path):
    module, inputs = tiny_convnet()
    path = tmp_path / "tiny.pt2"
    torch.export.save(torch.export.export(module.eval(), inputs), path)
    spec = models.create(f"{path}.int8")
    assert spec.exported is None and is_quantized(spec.module)  # exported again, quantized
    assert models.source_digest(f"{path}.int8") != models.source_digest(str(path))


def test_an_int8_variant_of_a_quantized_model_is_one_clear_error():
    with pytest.raises(InvalidModelError, match=r"quantized already; name it without \.int8"):
        models.create("tests.helpers.user_models:quantized_tiny_convnet.int8")


def test_int8_programs_get_an_int8_tolerance():
    reference = [torch.tensor([[-4.0, 2.0]])]
    assert tolerance(reference) == pytest.approx(4e-3)
    assert tolerance(reference, "int8") == pytest.approx(0.4)


class _OffByFiveHundredths:
    """A runtime whose outputs are eager PyTorch's plus 0.05: within an int8 program's
    tolerance, not within a float one's."""

    name = "offset-stand-in"

    def run(self, pte, inputs, reference, settings, workdir):
        return runners.RunResult([1.0] * settings.iterations, [t + 0.05 for t in reference], 0, [])


@pytest.mark.parametrize("model, status", [(MODEL, "ok"), ("synthetic_small", "failed")])
def test_vulkan_run_holds_an_int8_program_to_the_int8_tolerance(model, status, tmp_path, monkeypatch):
    monkeypatch.setattr("harness.targets.vulkan.targets.find_runtime", lambda et_runner, from_environment: _OffByFiveHundredths())
    settings = runners.RunSettings(warmup=1, iterations=2, repeats=1)
    records = run_sweep([model], ["bfs-downstream"], "vulkan-run", RecordStore(tmp_path),
                        context=MeasureContext(tmp_path, run_settings=settings),
                        execution=Execution(workers=0)).records  # in this process, where the patch is
    assert records[0]["status"] == status, records[0]["reason"]
    assert records[0]["max_abs_error"] == pytest.approx(0.05, rel=1e-5)  # float32 sums
