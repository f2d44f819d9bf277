# Linear + sigmoid + row sum as one Helion kernel: each program computes whole rows of the GEMM (bias
# included), applies the sigmoid and reduces them in registers; only the [M, 1] sums are written.

import helion
import helion.language as hl
import torch
import torch.nn as nn


@helion.kernel(config=helion.Config(block_sizes=[32, 64]), static_shapes=True)
def linear_sigmoid_rowsum(x: torch.Tensor, w_t: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    m, k = x.size()
    n = w_t.size(1)
    out = torch.empty([m], dtype=x.dtype, device=x.device)
    for tile_m in hl.tile(m):
        acc = hl.zeros([tile_m, n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.addmm(acc, x[tile_m, tile_k], w_t[tile_k, :])
        out[tile_m] = torch.sum(torch.sigmoid(acc + bias[None, :]), dim=1)
    return out


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear_sigmoid_rowsum(x, self.linear.weight.t(), self.linear.bias).unsqueeze(1)
