"""The profile tool's parts, without a server: the speed-of-light a verdict's answer shows (its GPU's, none
on the CPU) and the fraction of it reached, the candidate's own kernels, the reference's profile made once
per problem, and on a GPU the whole tool. Over the SDK's clients: test_mcp_http.py, test_mcp_stdio.py."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from evalfixtures import fixture_source

from kbench.analysis.gpus import get_gpu
from kbench.analysis.roofline import speed_of_light
from kbench.config import RunConfig
from kbench.mcp import reference
from kbench.mcp.public import own_kernels, verdict_view
from kbench.problems import get_problem
from kbench.types import BuildResult, Correctness, Status, TimingStats, Verdict


def verdict(device: str, status: Status = Status.OK, share: float | None = 0.93751) -> Verdict:
    timed = status is Status.OK
    return Verdict(
        status=status,
        problem_key="kbench:2/1",
        backend="cuda",
        preset="small",
        dtype="fp32",
        device=device,
        build=BuildResult(ok=True, backend="cuda", kernels=("gemm_relu",)),
        correctness=Correctness(passed=timed, seeds=(1, 2), max_abs_err=0.0 if timed else 3.0),
        timing=TimingStats(0.02, 0.02, 0.001, 0.001, 0.019, 100, 0.01, device=device) if timed else None,
        baselines=(("eager", TimingStats(0.05, 0.05, 0.001, 0.001, 0.049, 100, 0.01, device=device)),),
        kernel_share=share,
    )


def test_a_verdict_shows_the_speed_of_light_of_its_gpu_and_the_fraction_reached() -> None:
    gpu = verdict_view(verdict("cuda:0"), sol_ms=0.01)
    assert (gpu["sol_ms"], gpu["sol_fraction"], gpu["speedups"]) == (0.01, 0.5, {"eager": 2.5})
    wrong = verdict_view(verdict("cuda:0", Status.MISMATCH), sol_ms=0.01)
    assert wrong["sol_ms"] == 0.01 and "sol_fraction" not in wrong  # no time, no fraction
    own = verdict_view(replace(verdict("cuda:0"), sol_ms=0.004), sol_ms=0.01)
    assert (own["sol_ms"], own["sol_fraction"]) == (0.004, 0.2)  # a verdict's own figure comes first
    cpu = verdict_view(verdict("cpu"))
    assert "sol_ms" not in cpu and "sol_fraction" not in cpu and "seeds" not in str(cpu)


def test_own_kernels_are_those_that_ran_and_their_share_of_the_time() -> None:
    assert own_kernels(verdict("cuda:0")) == {
        "ran": ["gemm_relu"],
        "time_share": 0.9375,
        "share_of": "device time",
    }
    rejected = replace(verdict("cpu", share=None), build=None)
    assert own_kernels(rejected) == {"ran": [], "time_share": None, "share_of": "CPU time, sampled"}


def test_the_speed_of_light_is_the_devices_gpus_and_none_on_the_cpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = RunConfig(cache_dir=tmp_path)
    p = get_problem("2/1")
    assert reference.sol_ms(p, "small", "fp32", "cpu", cfg) is None
    assert reference.roofline_gpu("cpu")[0].name.startswith("H100")
    monkeypatch.setattr(reference, "device_gpu", lambda device: get_gpu("H200"))
    got = reference.sol_ms(p, "small", "fp32", "cuda:0", cfg)
    assert got is not None and got == speed_of_light(p, "small", "fp32", get_gpu("H200")).sol_ms
    assert list((tmp_path / "flops").glob("*.json")), "kept where the evaluator's floor reads its counts"
    assert reference.roofline_gpu("cuda:0") == (get_gpu("H200"), "")


def test_the_reference_is_profiled_once_per_problem_preset_and_device(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made: list[tuple[str, str]] = []
    profiled = reference._profiled

    def counted(p: Any, preset: str, dtype: str, device: str) -> Any:
        made.append((preset, device))
        return profiled(p, preset, dtype, device)

    monkeypatch.setattr(reference, "_profiled", counted)
    profiles = reference.Profiles()
    p = get_problem("2/1")
    first = profiles.reference(p, "small", "fp32", "cpu")
    assert profiles.reference(p, "small", "fp32", "cpu") is first and made == [("small", "cpu")]
    table = first["reference_profile"]
    # the GEMM is among the ops (which op tops the table on a loaded 2-core machine is the profiler's noise)
    names = [row["name"] for row in table["rows"]]
    assert table["device"] == "cpu" and "aten::addmm" in names and table["forward_ms"] > 0
    assert first["roofline"]["sol_ms"] > 0 and "ran on the CPU" in first["roofline"]["note"]
    assert "note" in profiles.reference(p, "small", "bf16", "cpu")["reference_profile"]  # not cast to bf16


@pytest.mark.gpu
def test_profile_on_a_gpu_shows_the_fraction_of_speed_of_light_and_the_references_kernels(
    tmp_path: Path,
) -> None:
    from kbench.mcp.tools import Budget, Workbench

    cfg = RunConfig(preset="small", device="cuda", backend="triton", baselines=["eager"], timing_budget_s=0.5,
                    cache_dir=tmp_path / "cache", store=tmp_path / "k.db")  # fmt: skip
    bench = Workbench(cfg, Budget(max_evals=1))
    try:
        answer = asyncio.run(bench.profile("2/1", fixture_source("triton_honest.py"), None))
    finally:
        bench.close()
    assert answer["status"] == "ok" and answer["device"].startswith("cuda"), answer
    kernels = answer["own_kernels"]
    assert kernels["ran"] and kernels["share_of"] == "device time" and 0 < kernels["time_share"] <= 1
    assert answer["sol_ms"] == answer["roofline"]["sol_ms"] > 0 and "note" not in answer["roofline"]
    assert answer["sol_fraction"] == pytest.approx(answer["sol_ms"] / answer["candidate_ms"], abs=1e-3)
    table = answer["reference_profile"]
    assert table["rows_are"].startswith("device kernels") and table["rows"] and table["launches"] >= 1
    assert answer["evals_left"] == 0 and answer["eval_seconds_left"] is None
