# Entropy of the row softmax as one Helion row kernel: with s = x - max(x) and Z = sum(exp(s)), the entropy
# -sum(p * log p) is log(Z) - sum(exp(s) * s) / Z, so each row is read once and only its entropy is written.

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


@helion.kernel(config=helion.Config(block_sizes=[32]), static_shapes=True)
def softmax_entropy(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty([m], dtype=x.dtype, device=x.device)
    for tile_m in hl.tile(m):
        xv = x[tile_m, :]
        s = xv - row_max(xv, hl.arange(n) < n, hl.zeros([tile_m], dtype=torch.float32))[:, None]
        e = exp(s)
        z = torch.sum(e, dim=1)
        out[tile_m] = torch.log(z) - torch.sum(e * s, dim=1) / z
    return out


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return softmax_entropy(x)
