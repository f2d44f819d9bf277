# Linear + ELU + per-feature scale and bias as one Helion GEMM with the chain in its epilogue.

import helion
import helion.language as hl
import torch
import torch.nn as nn


@helion.kernel(config=helion.Config(block_sizes=[64, 64, 64]), static_shapes=True)
def linear_elu_affine(
    x: torch.Tensor, w_t: torch.Tensor, bias: torch.Tensor, scale: torch.Tensor, shift: torch.Tensor
) -> torch.Tensor:
    m, k = x.size()
    n = w_t.size(1)
    out = torch.empty([m, n], dtype=x.dtype, device=x.device)
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.addmm(acc, x[tile_m, tile_k], w_t[tile_k, tile_n])
        y = acc + bias[tile_n]
        # torch.exp lowers to libdevice.exp, which Triton's CPU interpreter lacks; Triton's own tl.exp runs on both
        neg = torch.minimum(y, torch.zeros_like(y))
        elu = torch.where(y > 0, y, hl.inline_triton("tl.exp({0})", args=(neg,), output_like=neg) - 1.0)
        out[tile_m, tile_n] = elu * scale[tile_n] + shift[tile_n]
    return out


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = nn.Parameter(1.0 + torch.randn(out_features) * 0.1)
        self.bias = nn.Parameter(torch.randn(out_features) * 0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear_elu_affine(x, self.linear.weight.t(), self.linear.bias, self.scale, self.bias)
