"""Seeded models that sample the shapes a cost table must price: ``kernels:<seed>``.

Real models meet a device's operators at the sizes their architectures happen to have; a
cost model fitted on them alone does not know what an operator costs far from those sizes
(an attention over 4,096 tokens, a convolution over 256 x 256 pixels), where a GPU's time
per multiply-add is a fraction of a small operator's. As nn-Meter samples kernel
configurations to cover a device, each model here is one convolutional stage and one
attention stage at sizes drawn from the seed: channels 16 to 512, a feature map of 8 to 256
pixels a side (at most 16 Mi elements), attention over 64 to 4,096 tokens, a head width of 16 to 64, kernels of 3
or 5. The operators are the zoo's: convolutions (dense, depthwise, pointwise), group and
layer norm, global mean, linear, batched matrix products, softmax, elementwise activations,
permutes and views. ``kernels:<seed>.int8`` quantizes one as any model.
"""

import math
import random

import torch
from torch import nn

from models._registry import ModelSpec, register_seeded_family

MAX_TOKENS = 4096
MAX_SCORES = 1 << 26  # elements of the attention's scores (heads x tokens x tokens): a GPU buffer's limit
MAX_ELEMENTS = 16 << 20  # a feature map's, so that a seed's program also runs on a CPU driver in seconds


def log_uniform(rng: random.Random, low: int, high: int, multiple: int = 1) -> int:
    """A size drawn log-uniformly from ``low`` to ``high``, rounded to a ``multiple``."""
    value = math.exp(rng.uniform(math.log(low), math.log(high)))
    return max(low, int(round(value / multiple)) * multiple)


class KernelStages(nn.Module):
    """A convolutional stage (dense, depthwise and pointwise convolutions, group norm, a
    residual) at ``side`` pixels, then an attention stage over at most :data:`MAX_TOKENS`
    tokens (layer norm, linear projections, batched products, softmax, a feed-forward)."""

    def __init__(self, channels: int, side: int, head_width: int, kernel: int, pool: int):
        super().__init__()
        heads = max(1, channels // head_width)
        width = heads * head_width
        self.heads, self.head_width, self.pool = heads, head_width, pool
        self.dense = nn.Conv2d(channels, channels, kernel, padding=kernel // 2)
        self.depthwise = nn.Conv2d(channels, channels, kernel, padding=kernel // 2, groups=channels)
        self.expand = nn.Conv2d(channels, 2 * channels, 1)
        self.project = nn.Conv2d(2 * channels, width, 1)
        self.norm = nn.GroupNorm(min(8, width), width)
        self.token_norm = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.out = nn.Linear(width, width)
        self.feed_forward = nn.Sequential(nn.Linear(width, 2 * width), nn.GELU(), nn.Linear(2 * width, width))

    def forward(self, x: torch.Tensor):
        y = torch.relu(self.dense(x))
        y = nn.functional.hardswish(self.depthwise(y)) + x
        y = self.project(nn.functional.gelu(self.expand(y)))
        y = self.norm(y) * torch.sigmoid(y.mean(dim=(2, 3), keepdim=True))
        if self.pool > 1:
            y = nn.functional.avg_pool2d(y, (self.pool, self.pool), (self.pool, self.pool))
        batch, width, height, breadth = y.shape
        tokens = y.flatten(2).transpose(1, 2)
        q, k, v = self.qkv(self.token_norm(tokens)).split(width, dim=-1)
        q, k, v = (t.reshape(batch, -1, self.heads, self.head_width).transpose(1, 2) for t in (q, k, v))
        attention = torch.softmax(q @ k.transpose(-2, -1) * self.head_width ** -0.5, dim=-1)
        mixed = (attention @ v).transpose(1, 2).reshape(batch, -1, width)
        tokens = tokens + self.out(mixed)
        tokens = tokens + self.feed_forward(tokens)
        return tokens, y


def kernels_spec(seed: int) -> ModelSpec:
    rng = random.Random(seed)
    channels = log_uniform(rng, 16, 512, 8)
    tokens = log_uniform(rng, 64, MAX_TOKENS)
    side = min(max(log_uniform(rng, 8, 256), math.isqrt(tokens)), math.isqrt(MAX_ELEMENTS // channels))
    pool = max(1, math.ceil(side / math.sqrt(tokens)))  # the attention stage's tokens: (side / pool) ** 2
    head_width = rng.choice((16, 32, 64))
    kernel = rng.choice((3, 3, 5))
    heads = max(1, channels // head_width)
    pool = max(pool, math.ceil(side / math.isqrt(math.isqrt(MAX_SCORES // heads))))  # scores within MAX_SCORES
    torch.manual_seed(seed)
    module = KernelStages(channels, side, head_width, kernel, pool).eval()
    example = torch.randn(1, channels, side, side, generator=torch.Generator().manual_seed(seed))
    return ModelSpec(f"kernels:{seed}", module, (example,))


register_seeded_family("kernels", kernels_spec)
