"""Mamba-style block: in-projection, causal depthwise conv, input-dependent dt/B/C, sequential selective scan."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

# The discretised (batch, seq, d_inner, d_state) tensors dA and dBu are 256 MiB each; the scan
# runs seq_len sequential steps, so eager launches ~4 small kernels per step.
batch_size = 8
seq_len = 512
d_model = 512
d_state = 16
d_conv = 4
expand = 2

KBENCH_PRESETS = {"small": {"batch_size": 2, "seq_len": 16, "d_model": 32, "d_state": 4}}
KBENCH_TAGS = ["architecture", "ssm", "scan"]


class Model(nn.Module):
    def __init__(self, d_model: int, d_state: int, d_conv: int, expand: int):
        super().__init__()
        d_inner = expand * d_model
        self.dt_rank = math.ceil(d_model / 16)
        self.d_state = d_state
        self.in_proj = nn.Linear(d_model, 2 * d_inner, bias=False)
        self.conv1d = nn.Conv1d(d_inner, d_inner, d_conv, groups=d_inner, padding=d_conv - 1)
        self.x_proj = nn.Linear(d_inner, self.dt_rank + 2 * d_state, bias=False)
        self.dt_proj = nn.Linear(self.dt_rank, d_inner)
        # S4D-real initialisation: A[:, n] = -(n + 1), stored as a log so A stays negative.
        a = torch.arange(1, d_state + 1, dtype=torch.float32).repeat(d_inner, 1)
        self.A_log = nn.Parameter(torch.log(a))
        self.D = nn.Parameter(torch.ones(d_inner))
        self.out_proj = nn.Linear(d_inner, d_model, bias=False)

    def selective_scan(
        self, u: torch.Tensor, dt: torch.Tensor, b: torch.Tensor, c: torch.Tensor
    ) -> torch.Tensor:
        a = -torch.exp(self.A_log)  # (d_inner, d_state)
        d_a = torch.exp(dt.unsqueeze(-1) * a)  # (batch, seq, d_inner, d_state)
        d_bu = (dt * u).unsqueeze(-1) * b.unsqueeze(2)
        h = torch.zeros_like(d_a[:, 0])
        ys = []
        for t in range(u.shape[1]):
            h = d_a[:, t] * h + d_bu[:, t]
            ys.append(torch.sum(h * c[:, t].unsqueeze(1), dim=-1))
        return torch.stack(ys, dim=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        seq = x.shape[1]
        u, z = self.in_proj(x).chunk(2, dim=-1)
        u = F.silu(self.conv1d(u.transpose(1, 2))[..., :seq].transpose(1, 2))
        dt, b, c = self.x_proj(u).split([self.dt_rank, self.d_state, self.d_state], dim=-1)
        dt = F.softplus(self.dt_proj(dt))
        y = self.selective_scan(u, dt, b, c) + u * self.D
        return self.out_proj(y * F.silu(z))


def get_inputs():
    return [torch.randn(batch_size, seq_len, d_model)]


def get_init_inputs():
    return [d_model, d_state, d_conv, expand]
