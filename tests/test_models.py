"""The model registry and zoo."""

import pytest
import torch

import models
from harness.errors import InvalidModelError, ModelExportError, UnknownNameError, UsageError
from harness.pipeline.export_cache import export_model
from models.synthetic import make_recipe

TIMM_FAMILIES = {
    "resnet18", "mobilenetv3_small_100", "efficientnet_b0", "convnext_atto",
    "vit_small_patch16_224", "deit_tiny_patch16_224", "mobilevit_xs",
    "efficientformer_l1", "levit_128s", "fastvit_t8", "repvit_m1",
}


def test_zoos_hold_the_required_models():
    full = set(models.list_models(zoo="full"))
    assert TIMM_FAMILIES <= full
    assert {"edgetam_image_encoder", "edgetam_memory_attention"} <= full
    assert set(models.list_models(zoo="quick")) <= full
    assert {"quick", "full"} <= set(models.list_zoos())
    assert models.list_models("resnet*") == ["resnet18"]


def test_unknown_model_lists_known_ones():
    with pytest.raises(UnknownNameError) as raised:
        models.create("resnet9000")
    assert "resnet18" in str(raised.value) and "timm:<name>" in str(raised.value)
    with pytest.raises(InvalidModelError, match="'resnet18' has no fused attention to unfuse"):
        models.create("resnet18.unfused")
    with pytest.raises(UnknownNameError, match="unknown timm model"):
        models.create("timm:not_a_real_arch")
    with pytest.raises(UnknownNameError, match="zoo"):
        models.resolve_models(zoo="huge")


def test_timm_names_and_default_input_size():
    spec = models.create("timm:resnet10t")
    assert spec.input_shapes == [[1, *spec.module.pretrained_cfg["input_size"]]]
    assert models.create("mobilevit_xs").input_shapes == [[1, 3, 256, 256]]


def test_every_build_of_a_model_has_the_same_weights_and_leaves_the_generator_alone():
    """A cached export, a cached lowering and the eager module a run checks outputs against
    are built by different processes: they must agree."""
    first = models.create("timm:resnet10t").module.state_dict()
    torch.manual_seed(1234)
    after_seeding = torch.rand(1)
    torch.manual_seed(1234)
    second = models.create("timm:resnet10t").module.state_dict()
    assert torch.rand(1) == after_seeding  # the caller's generator is where it was
    assert first.keys() == second.keys()
    assert all(torch.equal(first[k], second[k]) for k in first)


def test_unfused_variant_switches_fused_attention_off():
    fused = models.create("deit_tiny_patch16_224")
    unfused = models.create("deit_tiny_patch16_224.unfused")
    assert any(getattr(m, "fused_attn", False) for m in fused.module.modules())
    assert not any(getattr(m, "fused_attn", False) for m in unfused.module.modules())
    assert unfused.name == "deit_tiny_patch16_224.unfused"
    unfused.module.load_state_dict(fused.module.state_dict())
    with torch.no_grad():
        expected = fused.module(*fused.example_inputs)
        got = unfused.module(*fused.example_inputs)
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("num_ops", [5, 40, 1000])
def test_synthetic_graphs_are_seeded_and_sized(num_ops):
    assert make_recipe(num_ops, 3) == make_recipe(num_ops, 3)
    assert make_recipe(num_ops, 3) != make_recipe(num_ops, 4)
    recipe, outputs = make_recipe(num_ops, 3)
    assert len(recipe) == num_ops and outputs
    kinds = {kind for kind, _, _ in recipe}
    if num_ops >= 40:
        assert {"conv", "linear", "layer_norm", "permute", "add"} <= kinds


def test_synthetic_graph_exports_every_op():
    spec = models.create("synthetic:60:2")
    exported = export_model(spec)
    calls = [n for n in exported.graph.nodes if n.op == "call_function"]
    assert len(calls) >= 60
    with pytest.raises(UsageError, match="a synthetic graph has 5 to 10000 ops, not 3"):
        models.resolve_models("synthetic:3")


def test_edgetam_parts_run():
    for name in ("edgetam_memory_attention", "edgetam_image_encoder"):
        spec = models.create(name)
        with torch.no_grad():
            out = spec.module(*spec.example_inputs)
        assert out is not None


def test_export_failure_is_one_clear_error():
    class DataDependent(torch.nn.Module):
        def forward(self, x):
            return x * 2 if x.sum() > 0 else x

    spec = models.ModelSpec("data_dependent", DataDependent(), (torch.ones(2),))
    with pytest.raises(ModelExportError, match="model 'data_dependent' failed to export"):
        export_model(spec)


def test_convs_seeds_cover_the_catalogs_direct_convolutions():
    """The corpus's convs:<seed> models measure what the runtime runs with its direct shader
    at the catalog's sizes: grouped convolutions that are not depthwise (4 to 256 channels a
    group, strided and not) and dilated ones."""
    seeds = [s for s in models.resolve_models(None, "calibration") if s.startswith("convs:")]
    assert len(seeds) >= 12
    per_group, sides = set(), set()
    for name in seeds:
        spec = models.create(name)
        convs = [m for m in spec.module.modules() if isinstance(m, torch.nn.Conv2d)]
        grouped = [c for c in convs if 1 < c.groups < c.in_channels]
        assert len(grouped) == 2 and any(c.stride == (2, 2) for c in grouped)
        assert any(c.dilation != (1, 1) and c.groups == 1 for c in convs)
        per_group.update(c.in_channels // c.groups for c in grouped)
        sides.add(spec.example_inputs[0].shape[-1])
        with torch.no_grad():
            assert spec.module(*spec.example_inputs).isfinite().all()
    assert min(per_group) <= 4 and max(per_group) >= 256
    assert min(sides) <= 14 and max(sides) >= 56
    assert models.create("convs:3").example_inputs[0].equal(models.create("convs:3").example_inputs[0])
    with pytest.raises(UnknownNameError, match="convs:<seed>"):
        models.resolve_models("convs:x")
