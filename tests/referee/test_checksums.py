"""Input checksums and the device digest (referee/checksums.py)."""

from __future__ import annotations

import pytest
import torch

from kbench.referee.checksums import checksum


def test_checksum_sees_one_changed_element() -> None:
    x = torch.randn(100)
    before = checksum([x])
    x[57] += 1
    assert checksum([x]) != before


def test_device_digest_detects_writes_and_permutations() -> None:
    from kbench.referee.checksums import device_digest

    x = torch.randn(1000, 37)
    base = device_digest(x)
    assert device_digest(x.clone()) == base and len(base) == 32
    swapped = x.clone()
    swapped[0, 0], swapped[5, 3] = x[5, 3].item(), x[0, 0].item()
    assert device_digest(swapped) != base  # same multiset of values, other positions
    flipped = x.clone()
    flipped.view(torch.int32)[123, 7] ^= 1  # one bit
    assert device_digest(flipped) != base
    assert device_digest(torch.sort(x.reshape(-1)).values.reshape(x.shape)) != base
    assert device_digest(x.reshape(-1)[:-1]) != device_digest(x.reshape(-1)[:-2])  # padding is not ignored
    assert device_digest(torch.empty(0)) == device_digest(torch.empty(0, 3))


def test_device_digest_does_not_depend_on_chunking(monkeypatch: pytest.MonkeyPatch) -> None:
    import kbench.referee.checksums as c

    x = torch.randint(-(2**31), 2**31 - 1, (4099,), dtype=torch.int64)
    whole = c.device_digest(x)
    monkeypatch.setattr(c, "DIGEST_WORDS", 100)
    assert c.device_digest(x) == whole
    assert c.device_digest(x.flip(0).flip(0)) == whole  # another tensor, equal bytes
