"""The speed-of-light floor, worked out by its own trusted worker (worker/floor.py) once per problem."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from kbench.analysis.gpus import get_gpu
from kbench.analysis.roofline import speed_of_light
from kbench.config import resolve
from kbench.evaluate import flow
from kbench.problems import get_problem
from kbench.sandbox.protocol import JobSpec
from kbench.worker.floor import compute_floor

GPU = "NVIDIA H200"


def test_the_worker_signs_the_roofline_floor() -> None:
    problem = get_problem("2/1")
    spec = JobSpec(role="floor", problem=problem, preset="full", dtype="fp32", device="cuda", gpu=GPU)
    result = compute_floor(spec)
    want = speed_of_light(problem, "full", "fp32", get_gpu("H200"), tf32=True).floor_ms
    assert result.message == "" and result.floor_ms == pytest.approx(want)


def test_an_unknown_gpu_or_a_failing_trace_is_a_message_not_a_floor() -> None:
    spec = JobSpec(
        role="floor", problem=get_problem("2/1"), preset="full", dtype="fp32", device="cuda", gpu=""
    )
    assert compute_floor(spec).floor_ms is None
    broken = dataclasses.replace(get_problem("2/1"), code="raise ValueError('no model here')")
    spec = spec.model_copy(update={"problem": broken, "gpu": GPU})
    failed = compute_floor(spec)
    assert failed.floor_ms is None and "ProblemError" in failed.message and "Model" in failed.message


def test_the_host_asks_a_worker_once_per_problem(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Through the sandbox (a worker process, no GPU needed: the trace runs on the meta device), and the
    second verdict of the problem in this process starts no worker."""
    monkeypatch.setattr(flow, "device_name", lambda device: GPU)
    monkeypatch.setattr(flow, "_floors", {})
    cfg = resolve(flags={"preset": "full", "cache_dir": tmp_path / "cache", "worker_start": "spawn"})
    problem = get_problem("2/23")
    first = flow.speed_floor(problem, cfg, "cuda", tmp_path / "a")
    want = speed_of_light(problem, "full", "fp32", get_gpu("H200"), tf32=True).floor_ms
    assert first == pytest.approx(want) and (tmp_path / "a" / "floor").is_dir()
    assert flow.speed_floor(problem, cfg, "cuda", tmp_path / "b") == first
    assert not (tmp_path / "b").exists()
    assert flow.speed_floor(problem, cfg, "cpu", tmp_path / "c") is None  # no GPU, no floor
