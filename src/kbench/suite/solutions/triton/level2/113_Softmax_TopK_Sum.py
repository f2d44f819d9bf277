"""Softmax + top-k + sum, rewritten exactly: the top-k probabilities are exp(v_j - m) / S for the k largest
logits v_j, so only the row max m, the sum S = sum exp(x - m) and the k largest logits are needed, all from
one read of the row. A Triton program (4 warps, so several rows share an SM and hide the latency of the
selection rounds) loads its row into registers when it fits (up to 8192 floats), takes the max and the
sum, and finds the k largest by k rounds of (max with index, knock that one copy out), so duplicated values
are counted as often as torch.topk counts them; longer rows are walked in chunks with an online max and
rescaled sum and a running top-k list merged chunk by chunk (eager: softmax reads the 32768 x 8192 input
twice and writes probabilities, topk reads them, a sum: ~3 passes of 1 GB and a sort-like top-k).

Full preset: 32768 x 8192, k = 8: 1 GB read once (~0.25 ms at 4.3 TB/s); 8 selection rounds over
registers per row. Max abs error on the small preset (interpreter): 8.9e-08 (tolerance 1e-4).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 8192  # chunk of a row per step


@triton.jit
def top_k_of(work, K, KP: tl.constexpr, BLOCK: tl.constexpr):
    """The K largest values of work (with repeats) in slots 0..K-1 of a KP vector, -inf after."""
    slots = tl.arange(0, KP)
    found = tl.full([KP], float("-inf"), tl.float32)
    for j in range(0, K):
        v, i = tl.max(work, axis=0, return_indices=True)
        found = tl.where(slots == j, v, found)
        work = tl.where(tl.arange(0, BLOCK) == i, float("-inf"), work)  # knock out one copy
    return found


@triton.jit
def softmax_topk_sum_kernel(
    x_ptr, out_ptr, N, K, BLOCK: tl.constexpr, KP: tl.constexpr, ONE_CHUNK: tl.constexpr
):
    pid = tl.program_id(0)
    row = pid.to(tl.int64) * N
    slots = tl.arange(0, KP)
    if ONE_CHUNK:  # the row fits in registers: max, sum and selection straight from them
        cols = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row + cols, mask=cols < N, other=float("-inf"))
        mx = tl.max(x, axis=0)
        total = tl.sum(tl.exp(x - mx), axis=0)
        top = top_k_of(x, K, KP, BLOCK)
    else:  # online max and rescaled sum per lane, and a running top-k list merged chunk by chunk
        top = tl.full([KP], float("-inf"), tl.float32)
        m = tl.full([BLOCK], float("-inf"), tl.float32)
        s = tl.zeros([BLOCK], dtype=tl.float32)
        for start in range(0, N, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            x = tl.load(x_ptr + row + cols, mask=cols < N, other=float("-inf"))
            m_new = tl.maximum(m, x)
            m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
            s = s * tl.exp(tl.where(m == float("-inf"), 0.0, m - m_use)) + tl.exp(x - m_use)
            m = m_new
            found = top_k_of(x, K, KP, BLOCK)
            merged = tl.full([KP], float("-inf"), tl.float32)
            for j in range(0, K):  # the K largest of the list and the chunk's K
                a, ia = tl.max(top, axis=0, return_indices=True)
                b, ib = tl.max(found, axis=0, return_indices=True)
                merged = tl.where(slots == j, tl.maximum(a, b), merged)
                a_wins = a >= b
                top = tl.where(slots == ia, tl.where(a_wins, float("-inf"), top), top)
                found = tl.where(slots == ib, tl.where(a_wins, found, float("-inf")), found)
            top = merged
        mx = tl.max(m, axis=0)
        total = tl.sum(s * tl.exp(tl.where(m == float("-inf"), float("-inf"), m - mx)), axis=0)
    mass = tl.sum(tl.where(slots < K, tl.exp(top - mx), 0.0), axis=0)
    tl.store(out_ptr + pid, mass / total)


class ModelNew(nn.Module):
    def __init__(self, k: int):
        super().__init__()
        self.k = k

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n = x.shape[-1]
        if not 0 < self.k <= n:
            raise ValueError(f"k = {self.k} is out of range for rows of {n}")
        out = torch.empty(x.shape[:-1], device=x.device, dtype=torch.float32)
        block = min(BLOCK, triton.next_power_of_2(n))
        # 4 warps (64 floats a thread at 8192): several rows per SM hide the selection rounds' latency
        softmax_topk_sum_kernel[(x.numel() // n,)](
            x, out, n, self.k, BLOCK=block, KP=max(2, triton.next_power_of_2(self.k)), ONE_CHUNK=block >= n,
            num_warps=max(1, min(4, block // 128)),
        )
        return out
