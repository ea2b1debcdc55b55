"""Seeded models of the convolutions ET-VK runs with its direct shader: ``convs:<seed>``.

``kernels:<seed>`` samples dense, depthwise and pointwise convolutions; ET-VK runs the
grouped convolutions that are not depthwise, and the dilated ones, with its direct
``conv2d`` shader (one thread per four output channels, looping over a group's input
channels), which neither those seeds nor the zoo measure at the catalog's sizes: a regnet,
a resnest or an efficientnet with grouped convolutions spends up to 61 % of its
multiply-adds there, with 4 to 256 input channels a group. Each model here is a grouped
convolution with a clamp (what ET-VK fuses into ``conv_with_clamp``), a grouped convolution
of stride 2 without one and a dilated convolution, at sizes drawn from the seed over the
timm catalog's range: 4 to 256 channels a group, 2 to 64 groups, 7 to 112 pixels a side,
kernels of 3 or 5. (Depthwise kernels wider than 5, ET-VK's generic depthwise shader, are
left out: a lone one computes wrong outputs on the pinned runtime, docs/gpu-time.md.)
"""

import math
import random

import torch
from torch import nn

from models._registry import ModelSpec, register_seeded_family
from models.kernels import log_uniform

MIN_CHANNELS, MAX_CHANNELS = 32, 1152  # the catalog's grouped convolutions' widths


def _channels_and_groups(rng: random.Random) -> tuple[int, int]:
    """A width and its groups, both drawn log-uniformly (channels a group 4 to 256, 2 to 64
    groups), redrawn until the width lies in the catalog's range."""
    while True:
        per_group, groups = 2 ** rng.randint(2, 8), 2 ** rng.randint(1, 6)
        if MIN_CHANNELS <= per_group * groups <= MAX_CHANNELS:
            return per_group * groups, groups


class DirectConvolutions(nn.Module):
    """Grouped (with and without a clamp, stride 1 and 2) and dilated convolutions, each
    feeding the next."""

    def __init__(self, channels: int, groups: int, strided_groups: int, kernel: int, dilation: int,
                 dilated_channels: int):
        super().__init__()
        self.grouped = nn.Conv2d(channels, channels, kernel, padding=kernel // 2, groups=groups)
        self.strided = nn.Conv2d(channels, channels, kernel, stride=2, padding=kernel // 2, groups=strided_groups)
        self.dilated = nn.Conv2d(channels, dilated_channels, 3, padding=dilation, dilation=dilation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.dilated(self.strided(torch.relu(self.grouped(x)))))


def convs_spec(seed: int) -> ModelSpec:
    rng = random.Random(seed)
    channels, groups = _channels_and_groups(rng)
    strided_groups = channels // 2 ** rng.randint(2, min(8, int(math.log2(channels)) - 1))
    side = log_uniform(rng, 7, 112)
    kernel = rng.choice((3, 3, 5))
    dilation = rng.choice((2, 3))
    dilated_channels = log_uniform(rng, 64, 512, 16)
    torch.manual_seed(seed)
    module = DirectConvolutions(channels, groups, strided_groups, kernel, dilation, dilated_channels).eval()
    example = torch.randn(1, channels, side, side, generator=torch.Generator().manual_seed(seed))
    return ModelSpec(f"convs:{seed}", module, (example,))


register_seeded_family("convs", convs_spec)
