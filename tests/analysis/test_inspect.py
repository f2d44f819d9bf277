import pytest

from kbench.analysis.gpus import get_gpu
from kbench.analysis.inspect import inspect_problem
from kbench.problems import get_problem, select

LEVEL2 = select(level=2)


@pytest.mark.parametrize("problem", LEVEL2, ids=[p.key for p in LEVEL2])
def test_every_level2_problem_has_a_fusion_group(problem) -> None:  # type: ignore[no-untyped-def]
    report = inspect_problem(problem, get_gpu("H100"), preset="small", device="cpu", compile=False)
    assert report.graph.fusion_groups, f"{problem.key}: no fusion group ({report.graph.error})"
    assert report.eager is not None and report.eager.ops and report.eager.kernel_launches >= 1
    assert report.sol.flops > 0 and report.sol.bytes > 0


def test_gemm_relu_groups_relu_into_the_gemm_epilogue() -> None:
    report = inspect_problem(
        get_problem("2/1"), get_gpu("H100"), preset="small", compile=False, profile=False
    )
    (group,) = report.graph.fusion_groups
    assert group.kind == "heavy+epilogue" and group.ops == ["linear", "relu"]
    (name, nbytes), *_ = group.intermediates  # the linear output never reaches memory when fused
    assert name == "linear" and group.bytes_saved == 2 * nbytes > 0


@pytest.mark.slow
def test_compile_view_reports_inductor_fusions() -> None:
    report = inspect_problem(get_problem("2/8"), get_gpu("H100"), preset="small", profile=False)
    compiled = report.compiled
    assert compiled is not None and compiled.fusions, "fusion log was empty"
    assert compiled.nodes_after < compiled.nodes_before
    assert any("fused" in k for k in compiled.kernels)
    assert compiled.launch_count < report.graph.groups[0].ops.__len__() + 1
    assert compiled.kernel_ms is None  # profiled kernel time exists on a GPU only


@pytest.mark.gpu
@pytest.mark.slow
def test_compiled_kernel_time_on_gpu() -> None:
    report = inspect_problem(get_problem("2/23"), get_gpu("H200"), preset="small", device="cuda")
    assert report.compiled is not None and report.compiled.kernel_ms is not None
    assert 0 < report.compiled.kernel_ms and report.eager_ms is not None and report.eager_ms > 0


def test_shards_partition_a_level() -> None:
    from kbench.cli.inspect import _shard
    from kbench.errors import ConfigError

    keys = [p.key for p in LEVEL2]
    parts = [keys[slice(*_shard(f"{i}/3"))] for i in range(3)]
    assert sorted(sum(parts, [])) == sorted(keys) and all(parts)
    for bad in ("3/3", "x", "1/0", "-1/2"):
        with pytest.raises(ConfigError):
            _shard(bad)


def test_the_profilers_own_log_lines_are_dropped_and_others_kept(capfd: pytest.CaptureFixture[str]) -> None:
    import os

    from kbench.analysis.profile import _without_profiler_log

    with _without_profiler_log():
        os.write(
            2, b"USDT:2026-12-05 07:38:07 10093:10093 SyncActivityProfilerHandler.cpp:52] profiler_start\n"
        )
        os.write(2, b"a warning of its own\n")
        os.write(
            2, b"STAGE:2026-12-05 07:38:48 10643:10643 SyncActivityProfilerHandler.cpp:51] Completed Stage\n"
        )
    assert capfd.readouterr().err == "a warning of its own\n"


def test_profiling_prints_nothing_of_the_profilers_own(capfd: pytest.CaptureFixture[str]) -> None:
    import torch

    from kbench.analysis.profile import profile_eager

    view = profile_eager(torch.nn.ReLU(), [torch.randn(8)], "cpu")
    assert view.ops and "USDT" not in capfd.readouterr().err
