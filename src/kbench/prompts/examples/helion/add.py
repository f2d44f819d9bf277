import helion
import helion.language as hl
import torch
import torch.nn as nn


@helion.kernel(config=helion.Config(block_sizes=[1024]), static_shapes=True)
def add_kernel(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(a)
    # one tile of 1024 elements per program; Helion masks the last, partial tile
    for tile in hl.tile(out.size(0)):
        out[tile] = a[tile] + b[tile]
    return out


def add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    a, b = a.contiguous(), b.contiguous()
    return add_kernel(a.view(-1), b.view(-1)).view(a.shape)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return add(a, b)
