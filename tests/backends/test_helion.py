"""The `helion` backend, a plugin registered through the `kbench.backends` entry point group: its kernels
found in a source, their generated Triton kernels' names, its worker environment, its precision rule, and a
whole CPU evaluation (the interpreter runs the generated kernel, which then compiles for sm_90 from the
module Helion generated, in the runner's own Inductor cache)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest

from kbench.backends import backend_names, get_backend
from kbench.checks import kernel_names, run_checks
from kbench.types import Candidate, Status

HONEST = (resources.files("kbench.selftest") / "fixtures/gelu_tanh/correct/honest.helion.py").read_text()


def test_registered_through_its_entry_point() -> None:
    from importlib.metadata import entry_points

    assert [p.value for p in entry_points(group="kbench.backends") if p.name == "helion"] == [
        "kbench.backends.helion"
    ]
    assert "helion" in backend_names()
    backend = get_backend("helion")
    assert (backend.title, backend.gpu_kernels, backend.needs_gpu) == ("Helion", True, False)


def test_kernels_are_its_decorated_functions_in_every_spelling() -> None:
    source = """
import helion
from helion import kernel
import helion.language as hl
import triton

@helion.kernel(config=helion.Config(block_sizes=[32]), static_shapes=True)
def add_one(x):
    pass

@kernel
def scale(x):
    pass

@triton.jit
def plain(x_ptr):
    pass

def helper(x):
    return add_one(x)
"""
    assert kernel_names(source, "helion") == ("add_one", "scale")
    assert kernel_names(source, "triton") == ("plain",)
    assert get_backend("helion").kernel_symbols(["add_one"]) == ["add_one", "_helion_add_one"]


def test_its_worker_runs_no_autotuning_and_fp32_dots() -> None:
    backend = get_backend("helion")
    cpu, gpu = backend.job_env("cpu"), backend.job_env("cuda")
    assert cpu["TRITON_INTERPRET"] == "1" and "TRITON_INTERPRET" not in gpu
    for env in (cpu, gpu):
        assert env["HELION_AUTOTUNE_EFFORT"] == "none" and env["TRITON_F32_DEFAULT"] == "ieee"


def _findings(source: str, backend: str) -> dict[str, str]:
    report = run_checks(source, backend, dtype="fp32")
    return {f.rule: f.message for f in report.findings}


def test_static_rules_name_the_backend_and_its_tf32_request() -> None:
    wrong_backend = _findings(HONEST, "triton")
    assert "pass --backend helion" in wrong_backend["no-kernel"]
    tf32 = HONEST.replace("static_shapes=True)", 'static_shapes=True, dot_precision="tf32")')
    assert "dot_precision='tf32'" in _findings(tf32, "helion")["precision-downgrade"]
    assert "precision-downgrade" not in _findings(HONEST, "helion")


@pytest.mark.slow
def test_a_helion_candidate_runs_and_its_generated_kernel_compiles_for_sm90(tmp_path: Path) -> None:
    pytest.importorskip("helion", reason="the helion extra is not installed (pip install 'kbench[helion]')")
    from evalfixtures import cpu_config

    from kbench.evaluate.flow import evaluate
    from kbench.problems.sources import load_source

    problem = load_source(str(resources.files("kbench.selftest") / "fixtures/gelu_tanh/problem.py"))[0]
    candidate = Candidate(problem.key, "helion", HONEST)
    v = evaluate(
        problem, candidate, cpu_config(tmp_path, backend="helion", measure=False, static_checks=True)
    )
    assert v.status is Status.OK, v.message + v.log_tail
    assert v.build is not None and "_helion_gelu_tanh: compiled for sm_90" in v.build.log, v.build
