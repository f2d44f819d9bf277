"""A 2-layer bidirectional nn.GRU returning the per-step outputs of both directions."""

import torch
import torch.nn as nn

batch_size = 64
seq_len = 512
input_size = 256
hidden_size = 256
num_layers = 2

KBENCH_PRESETS = {"small": {"batch_size": 4, "seq_len": 16, "input_size": 20, "hidden_size": 32}}
KBENCH_TAGS = ["architecture", "rnn"]
KBENCH_TOLERANCE = {"fp32": 1e-3}


class Model(nn.Module):
    def __init__(self, input_size: int, hidden_size: int, num_layers: int):
        super().__init__()
        self.gru = nn.GRU(
            input_size, hidden_size, num_layers=num_layers, batch_first=True, bidirectional=True
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        output, _ = self.gru(x)
        return output


def get_inputs():
    return [torch.randn(batch_size, seq_len, input_size)]


def get_init_inputs():
    return [input_size, hidden_size, num_layers]
