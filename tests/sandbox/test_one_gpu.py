"""A GPU worker sees only its own GPU, as cuda:0 (multi-GPU hosts)."""

from __future__ import annotations

import pytest

from kbench.sandbox.host import one_gpu
from kbench.sandbox.protocol import JobSpec


def _spec(device: str, role: str = "candidate") -> JobSpec:
    return JobSpec(role=role, preset="full", dtype="fp32", device=device)


def test_cuda_n_becomes_the_only_visible_device(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    spec, env = one_gpu(_spec("cuda:1"), {"OMP_NUM_THREADS": "1"})
    assert spec.device == "cuda:0" and env == {"OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": "1"}
    spec, env = one_gpu(_spec("cuda"), None)
    assert spec.device == "cuda:0" and env["CUDA_VISIBLE_DEVICES"] == "0"


def test_the_hosts_own_mask_is_respected(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,6")
    spec, env = one_gpu(_spec("cuda:1"), {})
    assert spec.device == "cuda:0" and env["CUDA_VISIBLE_DEVICES"] == "6"
    spec, env = one_gpu(_spec("cuda:0"), {"CUDA_VISIBLE_DEVICES": "GPU-abc,GPU-def"})  # the caller's wins
    assert env["CUDA_VISIBLE_DEVICES"] == "GPU-abc"
    spec, env = one_gpu(_spec("cuda:5"), {})  # not visible: unchanged, torch reports it in the worker
    assert spec.device == "cuda:5" and "CUDA_VISIBLE_DEVICES" not in env


def test_cpu_and_build_jobs_are_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert one_gpu(_spec("cpu"), {"A": "1"}) == (_spec("cpu"), {"A": "1"})
    spec, env = one_gpu(_spec("cuda:1", role="build"), {"CUDA_VISIBLE_DEVICES": ""})
    assert spec.device == "cuda:1" and env == {"CUDA_VISIBLE_DEVICES": ""}
