"""EdgeTAM parts, rebuilt from timm components with random weights (nothing downloaded).

EdgeTAM (facebookresearch/EdgeTAM) tracks with a RepViT-M1 image encoder and a memory
attention stack whose attention layers use axial rotary position embeddings (RoPE), as in
SAM 2. Sizes follow EdgeTAM's defaults: 1024 px frames (a 64 x 64 token grid at stride
16), d_model 256, 64-channel memory, one attention head, a 2048-wide MLP.
"""

import torch
from torch import nn

from models._registry import ModelSpec, register_model
from models._torchvision import import_timm

IMAGE_SIZE = 1024
TOKEN_GRID = (64, 64)
MEMORY_GRID = (16, 16)
MEMORY_FRAMES = 2
D_MODEL = 256
MEMORY_DIM = 64
MLP_DIM = 2048


class RopeAttention(nn.Module):
    """Single-head attention with axial RoPE applied to queries and keys."""

    def __init__(self, dim: int, kv_dim: int, q_grid, k_grid, k_repeat: int = 1):
        super().__init__()
        layers = import_timm().layers
        self.q_proj = nn.Linear(dim, dim)
        self.k_proj = nn.Linear(kv_dim, dim)
        self.v_proj = nn.Linear(kv_dim, dim)
        self.out_proj = nn.Linear(dim, dim)
        self.scale = dim**-0.5
        q_rope = layers.RotaryEmbeddingCat(dim, in_pixels=False, feat_shape=list(q_grid))
        k_rope = layers.RotaryEmbeddingCat(dim, in_pixels=False, feat_shape=list(k_grid))
        self.register_buffer("q_embed", q_rope.get_embed(), persistent=False)
        self.register_buffer("k_embed", k_rope.get_embed().repeat(k_repeat, 1), persistent=False)

    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor):
        apply_rope = import_timm().layers.apply_rot_embed_cat
        q = apply_rope(self.q_proj(query), self.q_embed)
        k = apply_rope(self.k_proj(key), self.k_embed)
        v = self.v_proj(value)
        attn = torch.softmax((q * self.scale) @ k.transpose(-2, -1), dim=-1)
        return self.out_proj(attn @ v)


class MemoryAttentionBlock(nn.Module):
    """Pre-norm self-attention, cross-attention to memory, and MLP, each residual."""

    def __init__(self):
        super().__init__()
        self.norm1 = nn.LayerNorm(D_MODEL)
        self.self_attn = RopeAttention(D_MODEL, D_MODEL, TOKEN_GRID, TOKEN_GRID)
        self.norm2 = nn.LayerNorm(D_MODEL)
        self.cross_attn = RopeAttention(D_MODEL, MEMORY_DIM, TOKEN_GRID, MEMORY_GRID, k_repeat=MEMORY_FRAMES)
        self.norm3 = nn.LayerNorm(D_MODEL)
        self.mlp = nn.Sequential(nn.Linear(D_MODEL, MLP_DIM), nn.ReLU(), nn.Linear(MLP_DIM, D_MODEL))

    def forward(self, tokens: torch.Tensor, memory: torch.Tensor, memory_pos: torch.Tensor):
        x = self.norm1(tokens)
        tokens = tokens + self.self_attn(x, x, x)
        x = self.norm2(tokens)
        tokens = tokens + self.cross_attn(x, memory + memory_pos, memory)
        return tokens + self.mlp(self.norm3(tokens))


@register_model(zoos=("quick", "full"))
def edgetam_memory_attention() -> ModelSpec:
    torch.manual_seed(0)
    module = MemoryAttentionBlock().eval()
    generator = torch.Generator().manual_seed(0)
    num_tokens = TOKEN_GRID[0] * TOKEN_GRID[1]
    num_memory = MEMORY_FRAMES * MEMORY_GRID[0] * MEMORY_GRID[1]
    inputs = (torch.randn(1, num_tokens, D_MODEL, generator=generator),
              torch.randn(1, num_memory, MEMORY_DIM, generator=generator),
              torch.randn(1, num_memory, MEMORY_DIM, generator=generator))
    return ModelSpec("edgetam_memory_attention", module, inputs)


@register_model(zoos=("full",))
def edgetam_image_encoder() -> ModelSpec:
    """RepViT-M1 trunk as EdgeTAM uses it: multi-scale features of a 1024 px frame."""
    timm = import_timm()
    module = timm.create_model("repvit_m1", pretrained=False, features_only=True).eval()
    generator = torch.Generator().manual_seed(0)
    return ModelSpec("edgetam_image_encoder", module, (torch.randn(1, 3, IMAGE_SIZE, IMAGE_SIZE, generator=generator),))
