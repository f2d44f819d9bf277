"""A causal self-attention block, forward and backward: out(attention(qkv(x))).

x (batch, seq, dim) goes through one biased linear to q, k and v, split into heads, causal scaled
dot-product attention, the heads merged, then a biased output linear. A training step: the gradients of
x and of both linears' weights and biases from an upstream gradient of the output (the last input)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

# 4 x 1024 tokens of 1024: ~5e10 FLOP in the linears and ~1.7e10 in attention, forward alone.
batch_size = 4
seq_len = 1024
dim = 1024
num_heads = 16

KBENCH_PRESETS = {"small": {"batch_size": 2, "seq_len": 64, "dim": 96, "num_heads": 4}}
KBENCH_TAGS = ["training", "attention", "gemm-epilogue"]
KBENCH_TRAINING = {"upstream": 1, "grad_inputs": [0]}
# The fp32 reference is up to 3e-5 from float64 on the full preset (H100; attention over up to 1024
# near-uniform keys cancels), so an honest kernel as far off on the other side needs ~6e-5: 2e-4 keeps
# room for that while the fp16/bf16 references (5e-3 and up) still fail.
KBENCH_TOLERANCE = {"fp32": 2e-4}


class Model(nn.Module):
    def __init__(self, dim: int, num_heads: int):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.num_heads = num_heads

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.num_heads, d // self.num_heads).permute(2, 0, 3, 1, 4)
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(att.transpose(1, 2).reshape(b, s, d))


def get_inputs():
    # dy scaled by 1/sqrt(tokens), as a loss averaged over the tokens scales it: the weight and bias
    # gradients, sums over the tokens, stay O(1) and are judged relative to their own scale (compare.py's
    # floor is min(1, rms)); unscaled, an honest fp32 sum in another order misses 1e-4 where one nears 0
    dy = torch.randn(batch_size, seq_len, dim) / (batch_size * seq_len) ** 0.5
    return [torch.randn(batch_size, seq_len, dim), dy]


def get_init_inputs():
    return [dim, num_heads]
