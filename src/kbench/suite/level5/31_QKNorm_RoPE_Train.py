"""QK-norm and rotary embeddings, forward and backward: per-head RMSNorm of q and k, then RoPE.

q (batch, heads, seq, head_dim) and k (batch, kv_heads, seq, head_dim) are each RMS-normalized over
head_dim with a learned scale (one for q, one for k), then rotated: x * cos + rotate_half(x) * sin, with
rotate_half(x) = cat(-x2, x1) for the two halves of head_dim, cos and sin (seq, head_dim) given as
inputs. A training step with two outputs: the gradients of q, k and both scales from the two upstream
gradients (the last two inputs)."""

import torch
import torch.nn as nn

# 4 x 32 heads (8 for k) x 2048 x 128: 128 MiB per q-sized tensor, 32 MiB per k-sized one.
batch_size = 4
num_heads = 32
num_kv_heads = 8
seq_len = 2048
head_dim = 128
eps = 1e-6
rope_base = 10000.0

KBENCH_PRESETS = {
    "small": {"batch_size": 2, "num_heads": 4, "num_kv_heads": 2, "seq_len": 48, "head_dim": 64}
}
KBENCH_TAGS = ["training", "rope", "norm"]
KBENCH_TRAINING = {"upstream": 2, "grad_inputs": [0, 1]}


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


class Model(nn.Module):
    def __init__(self, head_dim: int, eps: float):
        super().__init__()
        self.q_weight = nn.Parameter(1.0 + 0.1 * torch.randn(head_dim))
        self.k_weight = nn.Parameter(1.0 + 0.1 * torch.randn(head_dim))
        self.eps = eps

    def forward(
        self, q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        q = _rope(_rms_norm(q, self.q_weight, self.eps), cos, sin)
        k = _rope(_rms_norm(k, self.k_weight, self.eps), cos, sin)
        return q, k


def get_inputs():
    q_shape = (batch_size, num_heads, seq_len, head_dim)
    k_shape = (batch_size, num_kv_heads, seq_len, head_dim)
    inv_freq = 1.0 / rope_base ** (torch.arange(0, head_dim, 2).float() / head_dim)
    angles = torch.outer(torch.arange(seq_len).float(), inv_freq)
    angles = torch.cat((angles, angles), dim=-1)
    # upstream gradients scaled by 1/sqrt(rows), as a loss averaged over them scales them: the scales'
    # gradients, sums over the rows, stay O(1) and are judged relative to their own scale (compare.py's
    # floor is min(1, rms)); unscaled, an honest fp32 sum in another order misses 1e-4 where one nears 0
    return [
        torch.randn(q_shape),
        torch.randn(k_shape),
        angles.cos(),
        angles.sin(),
        torch.randn(q_shape) / (batch_size * num_heads * seq_len) ** 0.5,
        torch.randn(k_shape) / (batch_size * num_kv_heads * seq_len) ** 0.5,
    ]


def get_init_inputs():
    return [head_dim, eps]
