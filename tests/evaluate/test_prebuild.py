"""`prebuild`: a GPU-less build worker fills the content-addressed cache; the evaluation only loads."""

from __future__ import annotations

from pathlib import Path

import pytest
from evalfixtures import built_anew, cpu_config, fixture_source, use_builds

from kbench.evaluate.flow import evaluate
from kbench.evaluate.prebuild import cuda_arch_list, prebuild
from kbench.problems import get_problem
from kbench.types import Candidate, Status


@pytest.mark.slow
def test_prebuild_then_evaluate_is_a_cache_hit(tmp_path: Path, shared_builds: Path) -> None:
    problem = get_problem("kbench:2/1")
    source = built_anew(fixture_source("cpp_honest.py"), f"built by {tmp_path.name}")
    candidate = Candidate(problem.key, "cpp", source)
    cfg = cpu_config(use_builds(tmp_path / "cache", shared_builds), measure=False)
    built = prebuild(candidate, cfg, "cpu")
    assert built.ok and not built.cache_hit and built.seconds > 0, built.log
    assert "gemm_relu" in built.kernels
    verdict = evaluate(problem, candidate, cfg)
    assert verdict.status is Status.OK, verdict.message + verdict.log_tail
    assert verdict.build is not None and verdict.build.cache_hit


@pytest.mark.slow
@pytest.mark.xdist_group("cpp-build-error")  # after or before test_flow's, never beside it
def test_prebuild_reports_a_build_error(tmp_path: Path, shared_builds: Path) -> None:
    """In the session's builds: test_flow's build error compiles the same source, so one of the two
    compiles it and the other gets what the compiler said from the cache; both report it."""
    candidate = Candidate("kbench:2/1", "cpp", fixture_source("cpp_build_error.py"))
    built = prebuild(candidate, cpu_config(use_builds(tmp_path / "cache", shared_builds)), "cpu")
    assert not built.ok and "error:" in built.log


def test_an_import_that_hangs_holds_a_builder_for_the_load_budget_only(tmp_path: Path) -> None:
    """The build worker's import of the candidate has the load budget (its compiles have the build
    budget, counted apart): a candidate that sleeps at import is a `timeout load` after load_timeout_s,
    however long build_timeout_s is, and the builder is free again for the next job."""
    import time

    sleeper = "import time\nimport torch.nn as nn\ntime.sleep(120)\n\nclass ModelNew(nn.Module):\n    pass\n"
    cfg = cpu_config(tmp_path, load_timeout_s=3.0, build_timeout_s=600.0)
    t0 = time.monotonic()
    built = prebuild(Candidate("kbench:2/1", "cpp", sleeper), cfg, "cpu")
    took = time.monotonic() - t0
    assert not built.ok and built.status == "timeout" and built.rule == "load", built
    assert "load_timeout_s" in built.message and took < 60, (took, built.message)
    verdict = evaluate(get_problem("kbench:2/1"), Candidate("kbench:2/1", "cpp", sleeper), cfg)
    assert verdict.status is Status.TIMEOUT and verdict.rule == "load", verdict.message


def test_prebuild_of_triton_builds_nothing(tmp_path: Path) -> None:
    built = prebuild(
        Candidate("kbench:2/1", "triton", fixture_source("triton_honest.py")), cpu_config(tmp_path), "cpu"
    )
    assert built.ok and built.seconds == 0.0


def test_arch_list_falls_back_to_config(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("TORCH_CUDA_ARCH_LIST", raising=False)
    assert cuda_arch_list(cpu_config(Path("."), cuda_arch="8.0"), "cpu") == "8.0"
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "8.0;9.0")
    assert cuda_arch_list(cpu_config(Path(".")), "cuda:0") == "8.0;9.0"


def test_candidate_env_carries_the_build_recipes(tmp_path: Path) -> None:
    from kbench.backends import fastbuild, pch
    from kbench.evaluate.prebuild import candidate_env

    cfg = cpu_config(tmp_path)
    env = candidate_env("cuda", cfg, "cuda:0")
    assert (env[fastbuild.RECIPE_ENV], env[pch.PCH_ENV], env[fastbuild.OPS_ENV]) == ("fast", "use", "1")
    off = candidate_env(
        "cuda", cfg.model_copy(update={"op_headers": False, "fast_builds": False}), "cuda:0", True
    )
    assert (off[fastbuild.RECIPE_ENV], off[pch.PCH_ENV], off[fastbuild.OPS_ENV]) == (
        "standard",
        "make",
        "0",
    )


def test_build_jobs_compile_at_lower_priority(tmp_path: Path) -> None:
    """Compilers yield the cores to the GPU lanes' runners: a build job's compiler (the referee's confined
    builder, backends/jitbuild.py) runs at BUILD_NICE above the host's niceness. A compiler the test
    provides reports its niceness in the build error."""
    import os

    from kbench.backends.jitbuild import BUILD_NICE

    cxx = tmp_path / "cxx"
    cxx.write_text(  # torch asks the compiler who it is first: the real one answers that
        '#!/bin/sh\ncase " $* " in *" -c "*) echo "niceness=$(nice)" >&2; exit 1;; esac\nexec c++ "$@"\n'
    )
    cxx.chmod(0o755)
    source = (
        "from torch.utils.cpp_extension import load_inline\n"
        "load_inline(name='m', cpp_sources='int f() { return 1; }', functions=['f'])\n"
    )
    os.environ["CXX"], old = str(cxx), os.environ.get("CXX")
    try:
        built = prebuild(
            Candidate("kbench:2/1", "cpp", source), cpu_config(tmp_path, fast_builds=False), "cpu"
        )
    finally:
        os.environ.pop("CXX") if old is None else os.environ.update(CXX=old)
    assert not built.ok and f"niceness={min(19, os.nice(0) + BUILD_NICE)}" in built.log + built.message


def test_a_statically_rejected_candidate_never_runs_not_even_to_build(tmp_path: Path) -> None:
    """Static checks come before any of the candidate's code runs, on the batch path's build step as in a
    verdict: its module-level code would leave a file behind if it ran."""
    marker = tmp_path / "ran"
    source = (
        fixture_source("cpp_honest.py") + f"\nimport subprocess\nopen({str(marker)!r}, 'w').write('ran')\n"
    )
    problem = get_problem("kbench:2/1")
    candidate = Candidate(problem.key, "cpp", source)
    cfg = cpu_config(tmp_path / "cache", static_checks=True, measure=False)
    built = prebuild(candidate, cfg, "cpu")
    assert (built.ok, built.status, built.rule) == (False, "static_reject", "static:threads-processes")
    verdict = evaluate(problem, candidate, cfg)
    assert (verdict.status, verdict.rule) == (Status.STATIC_REJECT, "static:threads-processes")
    assert not marker.exists()
