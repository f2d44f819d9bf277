"""Seeded inputs and IEEE numerics (problems/inputs.py)."""

from __future__ import annotations

import pytest
import torch

from kbench.problems.inputs import make_inputs
from kbench.referee.checksums import checksum


def test_seeded_inputs_are_reproducible_and_cast() -> None:
    def get_inputs() -> list[object]:
        return [torch.randn(4, 5), torch.arange(3), 7]

    a = make_inputs(get_inputs, 11, torch.device("cpu"), "bf16")
    b = make_inputs(get_inputs, 11, torch.device("cpu"), "bf16")
    c = make_inputs(get_inputs, 12, torch.device("cpu"), "bf16")
    assert a[0].dtype == torch.bfloat16 and a[1].dtype == torch.int64 and a[2] == 7
    assert checksum(a) == checksum(b) and checksum(a) != checksum(c)


def test_ieee_numerics_turns_tf32_off() -> None:
    import torch

    from kbench.problems.inputs import ieee_numerics

    torch.backends.cudnn.allow_tf32 = True
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.set_float32_matmul_precision("medium")
    try:
        ieee_numerics()
        assert torch.backends.cudnn.allow_tf32 is False
        assert torch.backends.cuda.matmul.allow_tf32 is False
        assert torch.get_float32_matmul_precision() == "highest"
    finally:
        torch.set_float32_matmul_precision("highest")


@pytest.mark.gpu
def test_gpu_inputs_and_checksums_are_made_on_the_device() -> None:
    import kbench.problems.inputs as c
    from kbench.referee.checksums import checksum

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    made = c.make_inputs(lambda: [torch.randn(1000, 100), 3], 5, torch.device("cuda:0"), "fp32")
    again = c.make_inputs(lambda: [torch.randn(1000, 100), 3], 5, torch.device("cuda:0"), "fp32")
    assert made[0].is_cuda and made[1] == 3 and torch.equal(made[0], again[0])
    x = torch.randn(64, 64, device="cuda")
    assert checksum([x]) == checksum([x.clone()]) and checksum([x]) != checksum([x.cpu()])
