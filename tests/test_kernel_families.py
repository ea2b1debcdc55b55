"""The kernel-family rule on hand-built nodes of each family, and checked against the shaders
the kept test ETDumps dispatched."""

from pathlib import Path

import pytest

from costmodel.kernel_families import FAMILY_SHADERS, dispatches_agree, family_shaders, kernel_family

from .helpers.signatures import BUFFER_C, BUFFER_W, TEXTURE_C, TEXTURE_W, convolution, node

ETVK_DATA = Path(__file__).parent / "data" / "etvk"


def int8_convolution(in_channels, out_channels, groups, spatial):
    args = [{"t": [1, in_channels, *spatial]}, 0.1, 0, {"w": [out_channels, 9 * in_channels // groups]}, {"w": [8]},
            {"w": [8]}, 0.1, 0, {"w": [8]}, [3, 3], [1, 1], [1, 1], [1, 1], groups, "none"]
    return node("et_vk.q8ta_conv2d.default", args, [[1, out_channels, *spatial]], "int8")


HAND_BUILT = {
    "conv2d:transposed": (convolution(64, 32, [2, 2], stride=2, transposed=True), TEXTURE_C, TEXTURE_C),
    "conv2d:depthwise_3x3": (convolution(64, 64, [3, 3], groups=64), TEXTURE_C, TEXTURE_C),
    "conv2d:depthwise_5x5": (convolution(64, 64, [5, 5], groups=64, operator="et_vk.conv_with_clamp.default"),
                             TEXTURE_C, TEXTURE_C),
    "conv2d:depthwise_sned_3x3": (convolution(64, 64, [3, 3], groups=64, stride=2), TEXTURE_C, TEXTURE_C),
    "conv2d:depthwise_sned": (convolution(64, 64, [7, 7], groups=64, stride=2), TEXTURE_C, TEXTURE_C),
    "conv2d:depthwise": (convolution(64, 64, [7, 7], groups=64), TEXTURE_C, TEXTURE_C),
    "conv2d:pointwise": (convolution(64, 256, [1, 1], groups=4, stride=2), TEXTURE_C, TEXTURE_C),
    "conv2d:im2col_gemm": (convolution(64, 128, [3, 3]), TEXTURE_C, TEXTURE_C),
    "conv2d:grouped": (convolution(256, 256, [3, 3], groups=2), TEXTURE_C, TEXTURE_C),
    "conv2d:direct": (convolution(64, 64, [3, 3]), TEXTURE_C, TEXTURE_C),
    "conv1d": (node("aten.convolution.default", [{"t": [1, 16, 100]}, {"w": [16, 16, 3]}, None, [1], [1], [1], False,
                                                 [0], 1], [[1, 16, 100]]), TEXTURE_C, TEXTURE_C),
    "conv1d:depthwise": (node("aten.convolution.default", [{"t": [1, 16, 100]}, {"w": [16, 1, 3]}, None, [1], [1], [1],
                                                           False, [0], 16], [[1, 16, 100]]),
                         "TEXTURE_3D/HEIGHT_PACKED", "TEXTURE_3D/HEIGHT_PACKED"),
    "linear:rows_4": (node("aten.linear.default", [{"t": [1, 196, 384]}, {"w": [1536, 384]}, {"w": [1536]}],
                           [[1, 196, 1536]]), TEXTURE_W, TEXTURE_W),
    "linear:rows_2": (node("aten.linear.default", [{"t": [1, 32, 768]}, {"w": [1024, 768]}], [[1, 32, 1024]]),
                      TEXTURE_W, TEXTURE_W),
    "linear:rows_1": (node("aten.linear.default", [{"t": [1, 384]}, {"w": [1000, 384]}], [[1, 1000]]),
                      TEXTURE_W, TEXTURE_W),
    "linear:scalar:rows_1": (node("aten.linear.default", [{"t": [1, 30]}, {"w": [10, 30]}], [[1, 10]]),
                             BUFFER_W, BUFFER_W),
    "matmul:rows_4": (node("aten.bmm.default", [{"t": [6, 196, 64]}, {"t": [6, 64, 196]}], [[6, 196, 196]]),
                      TEXTURE_W, TEXTURE_W),
    "linear:rows_1 (addmm of a weight)": (node("aten.addmm.default", [{"w": [10]}, {"t": [4, 32]}, {"w": [32, 10]}],
                                               [[4, 10]]), TEXTURE_W, TEXTURE_W),
    "mean:2d": (node("aten.mean.dim", [{"t": [1, 64, 56, 56]}, [2, 3], True], [[1, 64, 1, 1]]), TEXTURE_C, TEXTURE_C),
    "sum:per_row": (node("aten.sum.dim_IntList", [{"t": [1, 64, 256]}, [-1], True], [[1, 64, 1]]), BUFFER_W, BUFFER_W),
    "sum:packed_dim": (node("aten.sum.dim_IntList", [{"t": [1, 64, 256]}, [-1], True], [[1, 64, 1]]),
                       TEXTURE_W, TEXTURE_W),
    "amax:other_dim": (node("aten.amax.default", [{"t": [1, 64, 256]}, [1], True], [[1, 1, 256]]),
                       TEXTURE_W, TEXTURE_W),
    "softmax:packed_dim": (node("aten._softmax.default", [{"t": [6, 196, 196]}, -1, False], [[6, 196, 196]]),
                           TEXTURE_W, TEXTURE_W),
    "softmax:other_dim": (node("aten._softmax.default", [{"t": [6, 196, 196]}, -1, False], [[6, 196, 196]]),
                          TEXTURE_C, TEXTURE_C),
    "native_layer_norm:packed_dim": (node("aten.native_layer_norm.default",
                                          [{"t": [1, 196, 384]}, [384], {"w": [384]}, {"w": [384]}, 1e-5], []),
                                     TEXTURE_W, TEXTURE_W),
    "clone:int8": (node("aten.clone.default", [{"t": [1, 64, 8, 8]}], [[1, 64, 8, 8]], "int8"),
                   "BUFFER/PACKED_INT8_4W4C", "BUFFER/PACKED_INT8_4C1W"),
    "clone:texture": (node("aten.clone.default", [{"t": [1, 64, 8, 8]}], [[1, 64, 8, 8]]), TEXTURE_C, TEXTURE_C),
    "clone:texture_relayout": (node("aten.clone.default", [{"t": [1, 64, 8, 8]}], [[1, 64, 8, 8]]),
                               TEXTURE_C, TEXTURE_W),
    "clone:image_to_buffer": (node("aten.clone.default", [{"t": [1, 64, 8, 8]}], [[1, 64, 8, 8]]), TEXTURE_C, BUFFER_C),
    "clone:buffer_to_image": (node("aten.clone.default", [{"t": [1, 64, 8, 8]}], [[1, 64, 8, 8]]), BUFFER_W, TEXTURE_W),
    "clone:buffer": (node("aten.clone.default", [{"t": [1, 64, 8, 8]}], [[1, 64, 8, 8]]), BUFFER_W, BUFFER_C),
    "q8ta_conv2d:im2col": (int8_convolution(32, 64, 1, [128, 128]), "BUFFER/PACKED_INT8_CONV2D",
                           "BUFFER/PACKED_INT8_4C1W"),
    "q8ta_conv2d:general": (int8_convolution(64, 64, 2, [56, 56]), "BUFFER/PACKED_INT8_CONV2D",
                            "BUFFER/PACKED_INT8_4C1W"),
    "gelu": (node("aten.gelu.default", [{"t": [1, 196, 1536]}], [[1, 196, 1536]]), TEXTURE_W, TEXTURE_W),
}


@pytest.mark.parametrize("expected", HAND_BUILT)
def test_kernel_family_of_hand_built_nodes(expected):
    signature, input_repr, output_repr = HAND_BUILT[expected]
    assert kernel_family(signature, input_repr, output_repr) == expected.split(" (")[0]


@pytest.mark.parametrize("family, kernels, agrees", [
    ("conv2d:im2col_gemm", ["conv2d_im2col_texture2d_half", "conv2d_gemm_texture2d_half"], True),
    ("conv2d:grouped", ["conv2d_clamp_float"], True),
    ("conv2d:grouped", ["conv2d_dw_float"], False),  # a variant is no storage or dtype suffix
    ("conv2d:direct", ["conv2d_im2col_texture2d_half", "conv2d_gemm_texture2d_half"], False),
    ("linear:rows_2", ["linear_vec_bias_tile_row_2_texture3d_texture2d_half"], True),
    ("linear:rows_4", ["linear_vec_bias_tile_row_2_texture3d_texture2d_half"], False),
    ("clone:image_to_buffer", ["clone_image_to_buffer_float_float"], True),
    ("cat", ["set_zero_int32", "update_concat_offset_3_int32", "concat_3_texture3d_half"], True),
    ("relu", ["clamp_half_texture3d"], True),
    ("gelu", ["gelu_half_texture3d"], True),
    ("gelu", ["sigmoid_half_texture3d"], False),
    ("pow", ["pow_scalar_texture3d_float_float"], True),  # the families the catalog's corpus models added
    ("pow", ["binary_pow_texture3d_float"], True),
    ("_native_batch_norm_legit_no_training", ["batchnorm_half"], True),
    ("index", ["index_tensor_buffer_float"], True),
    ("unfold_copy", ["unfold_copy_buffer_float"], True),
])
def test_dispatches_agree_with_a_family_only_through_its_shaders(family, kernels, agrees):
    assert dispatches_agree(family, kernels) is agrees


def test_every_hand_built_family_names_its_shaders():
    table_driven = {expected.split(" (")[0] for expected in HAND_BUILT} - {"gelu"}
    assert table_driven <= set(FAMILY_SHADERS)
    assert family_shaders("permute_copy") == ("permute",)


def test_every_dispatch_of_the_test_etdumps_agrees_with_its_nodes_family():
    from harness.inspection.shader_agreement import agreement_by_family, node_agreement

    nodes = node_agreement([ETVK_DATA])
    assert nodes["etdump"].nunique() == len(list(ETVK_DATA.glob("*.etdump")))
    assert nodes["agrees"].all(), nodes.loc[~nodes["agrees"]].to_string()
    by_family = agreement_by_family(nodes)
    assert {"conv2d:direct", "linear:rows_1", "matmul:rows_1", "clone:texture_relayout"} <= set(by_family.index)
    assert (by_family["nodes"] == by_family["agree"]).all()
