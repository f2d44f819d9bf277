"""Token embedding lookup plus learned position embedding, then LayerNorm."""

import torch
import torch.nn as nn

batch_size = 64
seq_len = 2048
vocab_size = 32000
dim = 1024

KBENCH_PRESETS = {"small": {"batch_size": 2, "seq_len": 37, "vocab_size": 100, "dim": 64}}
KBENCH_TAGS = ["norm-act", "gather", "elementwise-chain"]


class Model(nn.Module):
    def __init__(self, vocab_size: int, seq_len: int, dim: int):
        super().__init__()
        self.token = nn.Embedding(vocab_size, dim)
        self.position = nn.Embedding(seq_len, dim)
        self.norm = nn.LayerNorm(dim)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(ids.shape[1], device=ids.device)
        return self.norm(self.token(ids) + self.position(positions))


def get_inputs():
    return [torch.randint(0, vocab_size, (batch_size, seq_len))]


def get_init_inputs():
    return [vocab_size, seq_len, dim]
