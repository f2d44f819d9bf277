"""The kernel-use profiler (backends/profile.py) on a GPU: sees the candidate's kernels, imports no dynamo."""

from __future__ import annotations

import subprocess
import sys

import pytest

_SCRIPT = """
import sys, torch
from kbench.backends.profile import gpu_kernels
x = torch.randn(1 << 20, device="cuda")
use = gpu_kernels(lambda: torch.relu(x), ["nothing_of_ours"])
print(len(use.library) > 0, use.ran, "torch._dynamo" in sys.modules)
"""


@pytest.mark.gpu
def test_kernel_use_profiles_device_kernels_without_importing_dynamo() -> None:
    """torch.profiler.profile's start imports torch._inductor and torch._dynamo (2-3 s of a cold candidate's
    start-up on an H200 host); the autograd profiler underneath it, used directly, does not."""
    out = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split("\n")[0].strip() == "True () False", out.stdout
