"""nn.Embedding lookup: gather rows of a learned table for a batch of token ids."""

import torch
import torch.nn as nn

# 64 x 4096 tokens x 1024 dims: a 1 GiB output gathered from a 196 MiB table.
batch_size = 128
seq_len = 4096
num_embeddings = 50257
embedding_dim = 1024

KBENCH_PRESETS = {"small": {"batch_size": 4, "seq_len": 33, "num_embeddings": 101, "embedding_dim": 48}}
KBENCH_TAGS = ["gather"]


class Model(nn.Module):
    def __init__(self, num_embeddings: int, embedding_dim: int):
        super().__init__()
        self.embedding = nn.Embedding(num_embeddings, embedding_dim)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.embedding(ids)


def get_inputs():
    return [torch.randint(0, num_embeddings, (batch_size, seq_len))]


def get_init_inputs():
    return [num_embeddings, embedding_dim]
