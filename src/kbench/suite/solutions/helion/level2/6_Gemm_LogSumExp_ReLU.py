# Linear + logsumexp over the features + ReLU as one Helion kernel: each program computes whole rows of the
# GEMM (bias included) and reduces them in registers; only the [M, 1] results are written.

import helion
import helion.language as hl
import torch
import torch.nn as nn


def exp(t: torch.Tensor) -> torch.Tensor:
    # torch.exp lowers to libdevice.exp, which Triton's CPU interpreter lacks; Triton's own tl.exp runs on both
    return hl.inline_triton("tl.exp({0})", args=(t,), output_like=t)


def row_max(y: torch.Tensor, valid: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    # tl.max over the columns that exist: torch.amax lowers to a NaN-propagating tl.reduce whose combine
    # Triton's CPU interpreter runs element by element (seconds per call at the small size)
    return hl.inline_triton(
        "tl.max(tl.where({1}[None, :], {0}, float('-inf')), 1)", args=(y, valid), output_like=like
    )


@helion.kernel(config=helion.Config(block_sizes=[64, 64]), static_shapes=True)
def linear_logsumexp_relu(x: torch.Tensor, w_t: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    m, k = x.size()
    n = w_t.size(1)
    out = torch.empty([m], dtype=x.dtype, device=x.device)
    for tile_m in hl.tile(m):
        acc = hl.zeros([tile_m, n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.addmm(acc, x[tile_m, tile_k], w_t[tile_k, :])
        y = acc + bias[None, :]
        y_max = row_max(y, hl.arange(n) < n, hl.zeros([tile_m], dtype=torch.float32))
        lse = y_max + torch.log(torch.sum(exp(y - y_max[:, None]), dim=1))
        out[tile_m] = torch.relu(lse)
    return out


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear_logsumexp_relu(x, self.linear.weight.t(), self.linear.bias).unsqueeze(1)
