"""Checksums of a call's inputs (referee side): both referees record them per seed, so inputs that differ
between the reference's job and the candidate's (a generator that is not deterministic) are caught.

Checksums of CPU tensors are SHA-256 over their bytes; those of GPU tensors are a position-weighted
digest computed on the device (a permutation or a write changes it), so nothing large crosses to the
host.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import torch


def checksum(values: Sequence[Any]) -> list[str]:
    """A SHA-256 prefix per input of its bytes (CPU tensors), device digest (GPU tensors) or repr."""
    out = []
    for x in values:
        h = hashlib.sha256()
        if isinstance(x, torch.Tensor):
            t = x.detach()
            h.update(f"{t.dtype}{tuple(t.shape)}{t.device.type}".encode())
            if t.device.type == "cpu":
                h.update(t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
            else:
                h.update(device_digest(t))
        else:
            h.update(repr(x).encode())
        out.append(h.hexdigest()[:24])
    return out


DIGEST_WORDS = 1 << 25  # 64-bit words per step: bounds the digest's scratch memory to ~1 GiB
_MIX = 0x9E3779B97F4A7C15 - (1 << 64)  # odd 64-bit constant (as a signed int64)


def device_digest(x: torch.Tensor) -> bytes:
    """A digest of a tensor's bytes computed where the tensor lives, 32 bytes returned to the host.

    The bytes are read as 64-bit words w_i (zero-padded); two sums wrap modulo 2**64: sum(w_i * (2i+1))
    and sum(f(w_i) * (2i+1)) with f a multiply-xorshift mix, plus the xor of all words. Integer sums are
    order-independent, so the digest is the same on every run; moving, permuting or rewriting any word
    changes it (short of a deliberately constructed collision). It detects writes into inputs and inputs
    that differ between the reference and the candidate, at memory bandwidth instead of a copy to the host
    and a SHA-256 over gigabytes.
    """
    flat = x.detach().contiguous().reshape(-1).view(torch.uint8)
    pad = (-flat.numel()) % 8
    if pad:
        flat = torch.cat([flat, flat.new_zeros(pad)])
    words = flat.view(torch.int64)
    acc = torch.zeros(3, dtype=torch.int64, device=words.device)
    for start in range(0, words.numel(), DIGEST_WORDS):
        w = words[start : start + DIGEST_WORDS]
        weight = torch.arange(start, start + w.numel(), dtype=torch.int64, device=w.device) * 2 + 1
        mixed = (w ^ (w >> 31)) * _MIX
        mixed = mixed ^ (mixed >> 29)
        acc[0] += (w * weight).sum()
        acc[1] += (mixed * weight).sum()
        acc[2] ^= _xor_all(w)
    return acc.cpu().numpy().tobytes() + words.numel().to_bytes(8, "little")


def _xor_all(w: torch.Tensor) -> torch.Tensor:
    """XOR of all words, by halving (torch has no xor reduction)."""
    while w.numel() > 1:
        if w.numel() % 2:
            w = torch.cat([w, w.new_zeros(1)])
        half = w.numel() // 2
        w = w[:half] ^ w[half:]
    return w.reshape(-1)[0] if w.numel() else torch.zeros((), dtype=torch.int64, device=w.device)
