"""A 3-layer nn.LSTM over a sequence, returning the top layer's final hidden state h_n[-1]."""

import torch
import torch.nn as nn

batch_size = 64
seq_len = 512
input_size = 256
hidden_size = 512
num_layers = 3

KBENCH_PRESETS = {
    "small": {"batch_size": 16, "seq_len": 16, "input_size": 24, "hidden_size": 64, "num_layers": 2}
}
KBENCH_TAGS = ["architecture", "rnn"]


class Model(nn.Module):
    def __init__(self, input_size: int, hidden_size: int, num_layers: int):
        super().__init__()
        self.lstm = nn.LSTM(input_size, hidden_size, num_layers=num_layers, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _, (h_n, _) = self.lstm(x)
        return h_n[-1]


def get_inputs():
    return [torch.randn(batch_size, seq_len, input_size)]


def get_init_inputs():
    return [input_size, hidden_size, num_layers]
