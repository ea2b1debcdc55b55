"""Models a user might bring from outside the zoo, used to test the plug-in paths."""

import torch
from torch import nn


def tiny_convnet():
    """A user's factory: a module and its example inputs (no ModelSpec needed)."""
    torch.manual_seed(0)
    module = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1), nn.Flatten(),
                           nn.Linear(8 * 16 * 16, 10))
    return module, (torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(0)),)


def not_a_model():
    return "a string"


class _DataDependent(nn.Module):
    def forward(self, x):
        return x * 2 if x.sum() > 0 else x


def data_dependent():
    """A model torch.export cannot export: its control flow depends on the data."""
    return _DataDependent(), (torch.ones(2),)


def wide_linear():
    """64 MiB of weights in one delegate: what a strategy's lowering keeps alive shows in
    the worker's resident memory."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4096, 4096), nn.ReLU()), (torch.randn(1, 4096),)


def quantized_tiny_convnet():
    """A user's factory returning a module quantized already (PT2E, convert_pt2e): it refuses
    ``.eval()`` like every exported graph."""
    from models.quantization import quantize_int8

    module, inputs = tiny_convnet()
    return quantize_int8(module.eval(), inputs), inputs


def exported_tiny_convnet():
    """A user's factory returning torch.export's module of its model (it refuses ``.eval()``)."""
    module, inputs = tiny_convnet()
    return torch.export.export(module.eval(), inputs).module(), inputs
