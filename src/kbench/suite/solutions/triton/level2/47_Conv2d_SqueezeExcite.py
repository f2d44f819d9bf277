"""Conv2d + squeeze-and-excitation: cuDNN convolution without its bias, then three Triton kernels:
1. squeeze: one program per (sample, channel) plane sums the conv output (the conv bias is added to the mean,
   not to every element);
2. excite: one program per sample runs the whole gate MLP in registers, sigmoid(W2 relu(W1 s + b1) + b2), and
   folds the conv bias in: it stores the pair (g_c, b_c g_c) for the last kernel;
3. scale: y * g + b g, in place, over (plane, block) programs with per-program scalars.
The conv output (268 MB at the full size) is read twice and written once; eager also writes the bias add,
launches two tiny GEMMs and their activations and writes the product through broadcasting (~6 passes).

The convolution (77 GFLOP at the full size) stays in cuDNN, IEEE fp32 with TF32 off as the reference runs it:
it is most of the time at the full size, and beating it takes a 3xTF32 implicit-GEMM kernel on the tensor
cores that has to be tuned on the GPU; what follows it is fused.
Max abs error vs the fp32 reference, small preset, over the evaluator's seeds (CPU, Triton interpreter):
2.4e-7."""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def plane_sum_kernel(y_ptr, sum_ptr, hw, BLOCK: tl.constexpr):
    plane = y_ptr + tl.program_id(0).to(tl.int64) * hw
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, hw, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(plane + offs, mask=offs < hw, other=0.0)
    tl.store(sum_ptr + tl.program_id(0), tl.sum(acc, axis=0))


@triton.jit
def excite_kernel(sum_ptr, cb_ptr, w1_ptr, b1_ptr, w2_ptr, b2_ptr, gate_ptr, channels, hidden, hw,
                  BC: tl.constexpr, BH: tl.constexpr):
    # program (sample): s = mean + conv bias; h = relu(W1 s + b1); g = sigmoid(W2 h + b2)
    n = tl.program_id(0)
    c = tl.arange(0, BC)
    j = tl.arange(0, BH)
    cmask = c < channels
    jmask = j < hidden
    cb = tl.load(cb_ptr + c, mask=cmask, other=0.0)
    s = tl.load(sum_ptr + n * channels + c, mask=cmask, other=0.0) / hw + cb
    wmask = jmask[:, None] & cmask[None, :]
    w1 = tl.load(w1_ptr + j[:, None] * channels + c[None, :], mask=wmask, other=0.0)  # [hidden, channels]
    h = tl.maximum(tl.sum(w1 * s[None, :], axis=1) + tl.load(b1_ptr + j, mask=jmask, other=0.0), 0.0)
    w2t = tl.load(w2_ptr + c[None, :] * hidden + j[:, None], mask=wmask, other=0.0)  # W2^T: [hidden, channels]
    g = tl.sigmoid(tl.sum(w2t * h[:, None], axis=0) + tl.load(b2_ptr + c, mask=cmask, other=0.0))
    tl.store(gate_ptr + (n * channels + c) * 2, g, mask=cmask)
    tl.store(gate_ptr + (n * channels + c) * 2 + 1, cb * g, mask=cmask)


@triton.jit
def scale_kernel(y_ptr, gate_ptr, hw, BLOCK: tl.constexpr):
    plane = tl.program_id(0)
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < hw
    ptr = y_ptr + plane.to(tl.int64) * hw + offs
    g = tl.load(gate_ptr + plane * 2)
    tl.store(ptr, tl.load(ptr, mask=mask) * g + tl.load(gate_ptr + plane * 2 + 1), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, reduction: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.fc1 = nn.Linear(out_channels, out_channels // reduction)
        self.fc2 = nn.Linear(out_channels // reduction, out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.conv2d(x, self.conv.weight, None, self.conv.stride, self.conv.padding).contiguous()
        n, c, h, w = y.shape
        hw = h * w
        sums = torch.empty(n * c, device=y.device, dtype=torch.float32)
        plane_sum_kernel[(n * c,)](y, sums, hw, BLOCK=min(2048, triton.next_power_of_2(hw)))
        gate = torch.empty(n * c * 2, device=y.device, dtype=torch.float32)
        hidden = self.fc1.out_features
        excite_kernel[(n,)](
            sums, self.conv.bias, self.fc1.weight, self.fc1.bias, self.fc2.weight, self.fc2.bias, gate,
            c, hidden, hw, BC=triton.next_power_of_2(c), BH=triton.next_power_of_2(hidden),
        )
        block = min(1024, triton.next_power_of_2(hw))
        scale_kernel[(n * c, triton.cdiv(hw, block))](y, gate, hw, BLOCK=block)
        return y
