"""Trivial answers (problems/trivial.py): each is judged as the evaluator would judge it, the low-precision
one is computed at low precision, and no problem of the suite lets one through (the CI sweep)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kbench.cli import app
from kbench.errors import ConfigError
from kbench.problems import select
from kbench.problems.answers import ANSWERS, BACKWARD
from kbench.problems.trivial import SweepSettings, sweep, sweep_problem
from kbench.types import Problem

MARGIN = 2.0  # every answer must need at least this times the tolerance on the small presets


def problem(body: str, tolerance: str = "") -> Problem:
    code = textwrap.dedent(
        f"""
        import torch
        import torch.nn as nn

        n = 64
        {tolerance}

        class Model(nn.Module):
            def __init__(self):
                super().__init__()

            def forward(self, x):
                {body}

        def get_inputs():
            return [torch.randn(n, 33)]

        def get_init_inputs():
            return []
        """
    )
    tol = (("fp32", float(tolerance.split(":")[1].strip(" }"))),) if tolerance else ()
    return Problem("test", 1, 1, "T", code, tolerance=tol)


def verdicts(p: Problem, **kw: object) -> dict[str, object]:
    result = sweep_problem(p, SweepSettings(preset="full", seeds=(1000, 1001), **kw))  # type: ignore[arg-type]
    assert not result.error, result.error
    return {a.name: a for a in result.answers}


def test_an_honest_problem_fails_every_answer_with_the_tolerance_each_would_need() -> None:
    answers = verdicts(problem("return torch.tanh(x) * 3 + x.sum(dim=1, keepdim=True)"))
    assert set(answers) == set(ANSWERS) - set(BACKWARD)  # an inference problem has no gradients
    for a in answers.values():
        assert not a.passed and a.needed_tol >= 1e-3, a  # type: ignore[attr-defined]


def test_an_output_equal_to_its_input_passes_as_the_first_input() -> None:
    answers = verdicts(problem("return x.clone()"))
    assert answers["first-input"].passed and answers["first-input"].needed_tol == 0.0  # type: ignore[attr-defined]
    assert not answers["zeros"].passed  # type: ignore[attr-defined]


def test_a_near_constant_output_passes_as_stale_and_constant() -> None:
    answers = verdicts(problem("return 1 + 1e-7 * x"))
    assert answers["stale"].passed and answers["constant"].passed  # type: ignore[attr-defined]
    assert not answers["first-input"].passed  # type: ignore[attr-defined]


def test_a_loose_tolerance_lets_fp16_through_and_a_tight_one_does_not() -> None:
    assert verdicts(problem("return torch.sigmoid(x)", 'KBENCH_TOLERANCE = {"fp32": 1e-2}'))["fp16"].passed  # type: ignore[attr-defined]
    assert not verdicts(problem("return torch.sigmoid(x)"))["fp16"].passed  # type: ignore[attr-defined]


def test_the_low_precision_answer_is_computed_at_low_precision() -> None:
    """(x + 1024) - 1024 in fp16 rounds x to whole numbers (fp16's spacing at 1024 is 1); rounding the fp32
    result to fp16 would be off by ~5e-4 at most."""
    fp16 = verdicts(problem("return (x + 1024.0) - 1024.0"))["fp16"]
    assert not fp16.passed and fp16.needed_tol > 0.05  # type: ignore[attr-defined]


def test_only_fp32_evaluations_have_lower_precision_answers() -> None:
    for dtype in ("fp16", "bf16"):
        assert set(verdicts(problem("return torch.tanh(x)"), dtype=dtype)) == set(ANSWERS) - {
            "fp16",
            "bf16",
        } - set(BACKWARD)


def test_a_reference_that_fails_is_the_result_not_a_crash() -> None:
    result = sweep_problem(problem("raise RuntimeError('boom')"), SweepSettings(preset="full"))
    assert result.failed and "boom" in result.error and not result.answers


def test_unknown_answers_are_refused() -> None:
    with pytest.raises(ConfigError, match="known: zeros"):
        sweep([], SweepSettings(answers=("zeroes",)))


def test_cli_strict_fails_when_an_answer_passes(tmp_path: Path) -> None:
    path = tmp_path / "1_Copy.py"
    path.write_text(problem("return x.clone()").code)
    runner = CliRunner()
    loose = runner.invoke(app, ["verify", "--source", str(path), "--trivial", "--preset", "full", "-q"])
    strict = runner.invoke(
        app,
        [
            "verify",
            "--source",
            str(path),
            "--trivial",
            "--strict",
            "--preset",
            "full",
            "-q",
            "--format",
            "json",
        ],
    )
    assert loose.exit_code == 0 and "1 where a trivial answer passes" in loose.output
    assert strict.exit_code == 1 and json.loads(strict.output)["results"][0]["passing"] == ["first-input"]
    bad = runner.invoke(app, ["verify", "--source", str(path), "--trivial", "--dtype", "fp64", "-q"])
    assert bad.exit_code != 0 and "fp64" in str(bad.exception or bad.output)
    lint = runner.invoke(app, ["verify", "--source", str(path), "--dtype", "fp16", "-q"])
    assert lint.exit_code != 0 and "--trivial only" in str(lint.exception or lint.output)


PROBLEMS = select("kbench")


@pytest.fixture(scope="module")
def suite_sweep() -> dict[str, object]:
    """Every problem's small preset, once: the reference runs once per seed and every answer reuses it."""
    return {r.problem_key: r for r in sweep(PROBLEMS, SweepSettings(preset="small", device="cpu"))}


@pytest.mark.xdist_group("trivial-sweep")  # one worker: the module's one sweep serves them all
@pytest.mark.parametrize("key", [p.key for p in PROBLEMS])
def test_no_trivial_answer_passes_any_problem(suite_sweep: dict[str, object], key: str) -> None:
    r = suite_sweep[key]
    assert not r.error, r.error  # type: ignore[attr-defined]
    assert not r.passing, [(a.name, a.needed_tol) for a in r.answers if a.passed]  # type: ignore[attr-defined]
    close = [(a.name, f"{a.needed_tol:.2g}") for a in r.answers if a.needed_tol < MARGIN * r.tol]  # type: ignore[attr-defined]
    assert not close, f"within {MARGIN}x of the tolerance {r.tol:g}: {close}"  # type: ignore[attr-defined]
