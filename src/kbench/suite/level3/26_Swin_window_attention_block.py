"""Swin-style block: windowed multi-head attention with relative position bias, then an MLP (pre-norm)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 32
height = 56
width = 56
dim = 128
num_heads = 4
window_size = 7

KBENCH_PRESETS = {
    "small": {"batch_size": 2, "height": 8, "width": 8, "dim": 32, "num_heads": 2, "window_size": 4}
}
KBENCH_TAGS = ["architecture", "attention", "transformer", "residual"]


def relative_position_index(ws: int) -> torch.Tensor:
    coords = torch.stack(torch.meshgrid(torch.arange(ws), torch.arange(ws), indexing="ij")).flatten(1)
    rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0) + (ws - 1)
    return rel[..., 0] * (2 * ws - 1) + rel[..., 1]  # (ws*ws, ws*ws) indices into the bias table


class Model(nn.Module):
    def __init__(self, dim: int, num_heads: int, window_size: int):
        super().__init__()
        self.num_heads = num_heads
        self.ws = window_size
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.bias_table = nn.Parameter(torch.randn((2 * window_size - 1) ** 2, num_heads) * 0.02)
        self.register_buffer("rel_index", relative_position_index(window_size))
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def window_attention(self, x: torch.Tensor) -> torch.Tensor:
        b, h, w, c = x.shape
        ws, nh = self.ws, self.num_heads
        win = x.view(b, h // ws, ws, w // ws, ws, c).permute(0, 1, 3, 2, 4, 5).reshape(-1, ws * ws, c)
        q, k, v = self.qkv(win).view(win.shape[0], ws * ws, 3, nh, c // nh).permute(2, 0, 3, 1, 4)
        bias = self.bias_table[self.rel_index].permute(2, 0, 1)  # (heads, ws*ws, ws*ws)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
        out = self.proj(out.transpose(1, 2).reshape(-1, ws * ws, c))
        return out.view(b, h // ws, w // ws, ws, ws, c).permute(0, 1, 3, 2, 4, 5).reshape(b, h, w, c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.window_attention(self.norm1(x))
        return x + self.mlp(self.norm2(x))


def get_inputs():
    return [torch.randn(batch_size, height, width, dim)]


def get_init_inputs():
    return [dim, num_heads, window_size]
