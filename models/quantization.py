"""The ``.int8`` variant: static int8 PT2E quantization, as ExecuTorch's own ET-VK tests
quantize (``backends/vulkan/test/test_vulkan_delegate.py``: ``XNNPACKQuantizer`` with the
per-channel symmetric config, ``prepare_pt2e``, calibration, ``convert_pt2e``).

Calibration runs the model's example inputs, then seeded random inputs of the same shapes,
so one name always gives the same quantized model.
"""

import torch

CALIBRATION_SEED = 0
CALIBRATION_ROUNDS = 4  # the example inputs, then three seeded draws


def calibration_inputs(example_inputs: tuple) -> list[tuple]:
    """The example inputs, then seeded normal draws of the same shapes (float tensors only;
    other inputs are kept as they are)."""
    generator = torch.Generator().manual_seed(CALIBRATION_SEED)
    return [example_inputs, *(tuple(torch.randn(t.shape, generator=generator, dtype=t.dtype)
                                    if isinstance(t, torch.Tensor) and t.is_floating_point() else t
                                    for t in example_inputs) for _ in range(CALIBRATION_ROUNDS - 1))]


def is_quantized(module: torch.nn.Module) -> bool:
    """Whether ``module`` is a PT2E-quantized graph (it has quantize/dequantize nodes)."""
    return isinstance(module, torch.fx.GraphModule) and any(
        node.op == "call_function" and getattr(node.target, "namespace", None) == "quantized_decomposed"
        for node in module.graph.nodes)


def quantize_int8(module: torch.nn.Module, example_inputs: tuple) -> torch.fx.GraphModule:
    """``module`` statically quantized to int8 (per-channel symmetric weights, per-tensor
    activations), calibrated on :func:`calibration_inputs`."""
    # Imported here: quantization pulls in torchao and the XNNPACK quantizer, which only
    # .int8 models need.
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    quantizer = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))
    # check_guards=False: torch 2.13's guard-checking submodule is a call_module that
    # prepare_pt2e cannot handle.
    graph = torch.export.export(module, example_inputs).module(check_guards=False)
    prepared = prepare_pt2e(graph, quantizer)
    with torch.no_grad():
        for inputs in calibration_inputs(example_inputs):
            prepared(*inputs)
    return convert_pt2e(prepared)
