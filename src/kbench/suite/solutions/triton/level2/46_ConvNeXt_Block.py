"""ConvNeXt block in three Triton kernels, each fusing what eager runs as separate passes:
1. depthwise 7x7 conv + its bias + LayerNorm + the permute to channels-last: a program owns 64 pixels of one
   sample and all their channels; 49 shifted [64 x C] loads of the NCHW input (coalesced along the pixels,
   mostly L1/L2 hits) accumulate the conv in registers, the LayerNorm (centered variance) runs over the
   channels there, and the tile is stored channels-last -- the permute is only which axis the tile's
   channels sit on;
2. fc1 + bias + GELU (erf, F.gelu's default): a GEMM [pixels x C] @ W1^T with the bias and GELU in its
   epilogue, the hidden activation written once;
3. fc2 + bias + layer scale + residual: a GEMM [pixels x 4C] @ W2^T whose epilogue reads x and stores
   x + gamma * (z + b2) straight back in NCHW (each 128-row tile lies in one sample, so the store is
   coalesced along the pixels).
Eager also writes and reads the conv output, both permuted copies, the LayerNorm output, the fc1 output before
GELU and the products with gamma.

The two GEMMs (69 GFLOP at the full size) run on tensor cores as 3xTF32 (input_precision="tf32x3": each fp32
operand split into a TF32 high part and a TF32 residual, the three significant cross products accumulated in
fp32), which keeps fp32-level accuracy -- the 1e-4 tolerance holds with a wide margin -- where cuBLAS with
TF32 off runs on the fp32 SIMT units. An earlier version of this solution ran the whole block in one kernel
that streamed the hidden units through registers; its [64 x C] tiles were too small for the tensor cores and
it ran at half of eager's speed, where writing the hidden activation once (537 MB) costs ~0.12 ms.
Max abs error vs the fp32 reference, small preset, over the evaluator's seeds (CPU, Triton interpreter):
2.4e-7."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

# launch settings: (BM, BN, BK, warps, stages) of each GEMM, (pixels, warps) of the conv + LayerNorm kernel.
# On an H200 at the full size the block took 2.07 ms with these; 64 pixels a program took 18 ms (the [64 x 128]
# conv accumulator and its 49 unrolled loads spill), 16 pixels 2.7 ms; 64-row or 4-warp GEMM tiles 2.3-3.2 ms.
FC1 = (128, 128, 64, 8, 3)
FC2 = (128, 128, 64, 8, 3)
DW = (32, 4)


@triton.jit
def dwconv_layernorm_kernel(x_ptr, dw_w_ptr, dw_b_ptr, ln_w_ptr, ln_b_ptr, t_ptr, channels, height, width, eps,
                            KS: tl.constexpr, BP: tl.constexpr, BC: tl.constexpr):
    """t[n * hw + p, c] = LayerNorm_c(dwconv(x)[n, c, p] + b[c]) for 64 pixels p of sample n."""
    hw = height * width
    n = tl.program_id(1)
    p = tl.program_id(0) * BP + tl.arange(0, BP)
    pmask = p < hw
    ph = p // width
    pw = p % width
    c = tl.arange(0, BC)
    cmask = c < channels
    x_base = x_ptr + n.to(tl.int64) * channels * hw
    chan = c[None, :] * hw
    acc = tl.zeros([BP, BC], dtype=tl.float32)
    for kh in tl.static_range(KS):
        ih = ph + (kh - KS // 2)
        hmask = pmask & (ih >= 0) & (ih < height)
        for kw in tl.static_range(KS):
            iw = pw + (kw - KS // 2)
            m = hmask & (iw >= 0) & (iw < width)
            v = tl.load(x_base + chan + (p + (kh - KS // 2) * width + (kw - KS // 2))[:, None],
                        mask=m[:, None] & cmask[None, :], other=0.0)
            wk = tl.load(dw_w_ptr + c * (KS * KS) + (kh * KS + kw), mask=cmask, other=0.0)
            acc += v * wk[None, :]
    acc += tl.load(dw_b_ptr + c, mask=cmask, other=0.0)[None, :]
    mean = tl.sum(acc, axis=1) / channels  # padded channels hold 0
    d = tl.where(cmask[None, :], acc - mean[:, None], 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(d * d, axis=1) / channels + eps)
    t = d * rstd[:, None] * tl.load(ln_w_ptr + c, mask=cmask, other=0.0)[None, :]
    t += tl.load(ln_b_ptr + c, mask=cmask, other=0.0)[None, :]
    rows = n.to(tl.int64) * hw + p
    tl.store(t_ptr + rows[:, None] * channels + c[None, :], t, mask=pmask[:, None] & cmask[None, :])


@triton.jit
def tile_ids(M, N, BM: tl.constexpr, BN: tl.constexpr, GROUP_M: tl.constexpr):
    """(row block, column block) of this program; GROUP_M row blocks share each band of W tiles in L2."""
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BM)
    per_group = GROUP_M * tl.cdiv(N, BN)
    first_m = (pid // per_group) * GROUP_M
    size_m = min(num_m - first_m, GROUP_M)
    return first_m + (pid % per_group) % size_m, (pid % per_group) // size_m


@triton.jit
def gemm_tile(a_ptr, w_ptr, rows, cols, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
              EVEN_K: tl.constexpr):
    """fp32 [BM, BN] tile of a @ W^T on 3xTF32 tensor cores, for in-bounds indices `rows` of a [M, K] and
    `cols` of W [N, K] (both K-contiguous)."""
    rk = tl.arange(0, BK)
    pa = a_ptr + rows.to(tl.int64)[:, None] * K + rk[None, :]
    pw = w_ptr + cols.to(tl.int64)[None, :] * K + rk[:, None]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        if EVEN_K:
            a = tl.load(pa)
            b = tl.load(pw)
        else:
            a = tl.load(pa, mask=rk[None, :] < K - k0, other=0.0)
            b = tl.load(pw, mask=rk[:, None] < K - k0, other=0.0)
        acc = tl.dot(a, b, acc, input_precision="tf32x3")
        pa += BK
        pw += BK
    return acc


@triton.jit
def fc1_gelu_kernel(t_ptr, w_ptr, b_ptr, h_ptr, M, N, K,
                    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
                    EVEN_K: tl.constexpr):
    pid_m, pid_n = tile_ids(M, N, BM, BN, GROUP_M)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    # rows/columns past the edge compute on row/column 0 (in bounds, no masks in the K loop); stores drop them
    acc = gemm_tile(t_ptr, w_ptr, rm % M, rn % N, K, BM, BN, BK, EVEN_K)
    h = acc + tl.load(b_ptr + rn, mask=rn < N, other=0.0)[None, :]
    h = 0.5 * h * (1.0 + tl.erf(h * 0.7071067811865476))
    tl.store(h_ptr + rm.to(tl.int64)[:, None] * N + rn[None, :], h, mask=(rm < M)[:, None] & (rn < N)[None, :])


@triton.jit
def fc2_scale_residual_kernel(h_ptr, w_ptr, b_ptr, g_ptr, x_ptr, out_ptr, M, N, K, hw,
                              BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
                              EVEN_K: tl.constexpr):
    """out[n, c, p] = x[n, c, p] + gamma[c] * (h[n * hw + p] @ W2[c] + b2[c]); N is the channel count."""
    pid_m, pid_n = tile_ids(M, N, BM, BN, GROUP_M)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    acc = gemm_tile(h_ptr, w_ptr, rm % M, rn % N, K, BM, BN, BK, EVEN_K)
    nmask = rn < N
    y = (acc + tl.load(b_ptr + rn, mask=nmask, other=0.0)[None, :]) * tl.load(g_ptr + rn, mask=nmask,
                                                                                other=0.0)[None, :]
    sample = (rm // hw).to(tl.int64)
    pix = rm % hw
    offs = (sample * N * hw + pix)[:, None] + rn.to(tl.int64)[None, :] * hw
    mask = (rm < M)[:, None] & nmask[None, :]
    res = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, res + y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dwconv = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)
        self.gamma = nn.Parameter(torch.full((dim,), 0.5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n, c, h, w = x.shape
        hw = h * w
        m = n * hw
        hidden = self.fc1.out_features
        t = torch.empty((m, c), device=x.device, dtype=x.dtype)
        bp, warps = DW
        dwconv_layernorm_kernel[(triton.cdiv(hw, bp), n)](
            x, self.dwconv.weight, self.dwconv.bias, self.norm.weight, self.norm.bias, t, c, h, w,
            self.norm.eps, KS=self.dwconv.kernel_size[0], BP=bp, BC=max(16, triton.next_power_of_2(c)),
            num_warps=warps,
        )
        act = torch.empty((m, hidden), device=x.device, dtype=x.dtype)
        bm, bn, bk, warps, stages = FC1
        fc1_gelu_kernel[(triton.cdiv(m, bm) * triton.cdiv(hidden, bn),)](
            t, self.fc1.weight.contiguous(), self.fc1.bias, act, m, hidden, c,
            BM=bm, BN=bn, BK=bk, GROUP_M=8, EVEN_K=c % bk == 0, num_warps=warps, num_stages=stages,
        )
        out = torch.empty_like(x)
        bm, bn, bk, warps, stages = FC2
        fc2_scale_residual_kernel[(triton.cdiv(m, bm) * triton.cdiv(c, bn),)](
            act, self.fc2.weight.contiguous(), self.fc2.bias, self.gamma, x, out, m, c, hidden, hw,
            BM=bm, BN=bn, BK=bk, GROUP_M=8, EVEN_K=hidden % bk == 0, num_warps=warps, num_stages=stages,
        )
        return out
