"""ViT front end: conv patch embedding, class token, learned positions, one pre-norm encoder block, head."""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 64
image_size = 224
patch_size = 16
dim = 768
num_heads = 12
mlp_ratio = 4
num_classes = 1000

KBENCH_PRESETS = {
    "small": {
        "batch_size": 4,
        "image_size": 16,
        "patch_size": 4,
        "dim": 32,
        "num_heads": 2,
        "num_classes": 10,
    }
}
KBENCH_TAGS = ["architecture", "transformer", "attention"]
KBENCH_TOLERANCE = {"fp32": 1e-3}


class EncoderBlock(nn.Module):
    def __init__(self, dim: int, num_heads: int, mlp_ratio: int):
        super().__init__()
        self.num_heads = num_heads
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, mlp_ratio * dim), nn.GELU(), nn.Linear(mlp_ratio * dim, dim))

    def attention(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.num_heads, d // self.num_heads).permute(2, 0, 3, 1, 4)
        out = F.scaled_dot_product_attention(q, k, v)
        return self.proj(out.transpose(1, 2).reshape(b, s, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class Model(nn.Module):
    def __init__(
        self, image_size: int, patch_size: int, dim: int, num_heads: int, mlp_ratio: int, num_classes: int
    ):
        super().__init__()
        num_patches = (image_size // patch_size) ** 2
        self.patch_embed = nn.Conv2d(3, dim, patch_size, stride=patch_size)
        self.cls_token = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.pos_embed = nn.Parameter(torch.randn(1, num_patches + 1, dim) * 0.02)
        self.block = EncoderBlock(dim, num_heads, mlp_ratio)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = self.patch_embed(images).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
        x = self.norm(self.block(x))
        return self.head(x[:, 0])


def get_inputs():
    return [torch.randn(batch_size, 3, image_size, image_size)]


def get_init_inputs():
    return [image_size, patch_size, dim, num_heads, mlp_ratio, num_classes]
