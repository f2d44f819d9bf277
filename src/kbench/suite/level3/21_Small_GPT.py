"""A small GPT: token + position embeddings, N pre-norm causal transformer blocks, final LN, LM head."""

import torch
import torch.nn as nn
import torch.nn.functional as F

# The 8 x 1024 x 32000 fp32 logits are 1 GiB; the LM head alone is 4e11 FLOP.
batch_size = 8
seq_len = 1024
vocab_size = 32000
dim = 768
num_heads = 12
num_layers = 4

KBENCH_PRESETS = {
    "small": {"batch_size": 2, "seq_len": 16, "vocab_size": 131, "dim": 32, "num_heads": 2, "num_layers": 2}
}
KBENCH_TAGS = ["architecture", "transformer", "attention", "residual"]
KBENCH_TOLERANCE = {"fp32": 1e-3}


class Block(nn.Module):
    def __init__(self, dim: int, num_heads: int):
        super().__init__()
        self.num_heads = num_heads
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(
            nn.Linear(dim, 4 * dim), nn.GELU(approximate="tanh"), nn.Linear(4 * dim, dim)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = (
            self.qkv(self.ln1(x)).view(b, s, 3, self.num_heads, d // self.num_heads).permute(2, 0, 3, 1, 4)
        )
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(att.transpose(1, 2).reshape(b, s, d))
        return x + self.mlp(self.ln2(x))


class Model(nn.Module):
    def __init__(self, vocab_size: int, seq_len: int, dim: int, num_heads: int, num_layers: int):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab_size, dim)
        self.pos_emb = nn.Embedding(seq_len, dim)
        self.blocks = nn.Sequential(*[Block(dim, num_heads) for _ in range(num_layers)])
        self.ln_f = nn.LayerNorm(dim)
        self.lm_head = nn.Linear(dim, vocab_size, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(ids.shape[1], device=ids.device)
        x = self.tok_emb(ids) + self.pos_emb(positions)
        return self.lm_head(self.ln_f(self.blocks(x)))


def get_inputs():
    return [torch.randint(0, vocab_size, (batch_size, seq_len))]


def get_init_inputs():
    return [vocab_size, seq_len, dim, num_heads, num_layers]
