"""Scale + causal mask + softmax: one Triton program per query row. Row i reads only its i + 1 unmasked
scores (about half the input), runs an online softmax over them and writes zeros for the masked tail; no
mask tensor is built (eager: triu + mul + masked_fill + softmax)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def causal_softmax_kernel(x_ptr, out_ptr, seq, scale, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    off = pid.to(tl.int64) * seq
    valid = pid % seq + 1  # query i sees keys 0..i
    m = tl.full([BLOCK], float("-inf"), tl.float32)
    s = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, valid, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < valid
        v = tl.load(x_ptr + off + cols, mask=mask, other=float("-inf")) * scale
        m_new = tl.maximum(m, v)
        s = s * tl.exp(tl.where(m_new == float("-inf"), 0.0, m - m_new)) + tl.where(mask, tl.exp(v - m_new), 0.0)
        m = m_new
    mb = tl.max(m, axis=0)
    inv = 1.0 / tl.sum(tl.where(m == float("-inf"), 0.0, s * tl.exp(m - mb)), axis=0)
    for start in range(0, seq, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < valid
        v = tl.load(x_ptr + off + cols, mask=mask, other=0.0) * scale
        tl.store(out_ptr + off + cols, tl.where(mask, tl.exp(v - mb) * inv, 0.0), mask=cols < seq)


class ModelNew(nn.Module):
    def __init__(self, seq_len: int, scale: float):
        super().__init__()
        self.seq_len = seq_len
        self.scale = scale

    def forward(self, scores: torch.Tensor) -> torch.Tensor:
        scores = scores.contiguous()
        out = torch.empty_like(scores)
        seq = scores.shape[-1]
        causal_softmax_kernel[(scores.numel() // seq,)](scores, out, seq, float(self.scale), BLOCK=1024)
        return out
