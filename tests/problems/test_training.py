"""Training problems (problems/training.py): the step's outputs and gradients, its errors, and what the
trivial answers, the lint and the format make of a problem with KBENCH_TRAINING."""

from __future__ import annotations

import textwrap

import pytest
import torch

from kbench.errors import ProblemError
from kbench.problems import load
from kbench.problems.format import parse_problem
from kbench.problems.lint import RULES, LintContext
from kbench.problems.loader import build_model
from kbench.problems.training import Step, Training, output_names, parse
from kbench.problems.trivial import SweepSettings, sweep_problem
from kbench.types import Problem


def training_problem(forward: str, training: str, inputs: str, params: str = "") -> Problem:
    code = textwrap.dedent(
        f"""
        import torch
        import torch.nn as nn

        n = 32
        KBENCH_TRAINING = {training}

        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                {params or "pass"}

            def forward(self, x):
                {forward}

        def get_inputs():
            return {inputs}

        def get_init_inputs():
            return []
        """
    )
    return Problem("test", 5, 1, "T", code)


SCALED = training_problem(
    "return torch.tanh(x) * self.w",
    '{"upstream": 1, "grad_inputs": [0]}',
    "[torch.randn(n, 16), torch.randn(n, 16)]",
    "self.w = nn.Parameter(torch.randn(16))",
)


def test_a_step_returns_the_outputs_then_the_inputs_then_the_parameters_gradients() -> None:
    loaded = load(SCALED)
    model = build_model(loaded)
    x, dy = loaded.get_inputs()
    out = loaded.judged(model)(x, dy)
    assert len(out) == 3
    xr = x.clone().requires_grad_()
    with torch.enable_grad():  # whatever an earlier test of this process left switched off
        y = torch.tanh(xr) * model.w
        dx, dw = torch.autograd.grad(y, [xr, model.w], dy)
    torch.testing.assert_close(out[0], y.detach())
    torch.testing.assert_close(out[1], dx)
    torch.testing.assert_close(out[2], dw)
    assert model.w.grad is None and not x.requires_grad  # nothing written on the model or the inputs
    assert not out[0].requires_grad
    assert output_names(loaded.training, model, 1) == [
        "output 0",
        "gradient of input 0",
        "gradient of parameter w",
    ]


def test_a_step_runs_with_gradients_off_around_it() -> None:
    loaded = load(SCALED)
    with torch.no_grad():
        out = loaded.judged(build_model(loaded))(*loaded.get_inputs())
    assert out[1].abs().sum() > 0


def test_a_scalar_loss_starts_its_backward_from_one() -> None:
    p = training_problem("return (x * x).sum()", '{"upstream": 0, "grad_inputs": [0]}', "[torch.randn(n, 4)]")
    loaded = load(p)
    (x,) = loaded.get_inputs()
    loss, dx = loaded.judged(build_model(loaded))(x)
    torch.testing.assert_close(dx, 2 * x)
    torch.testing.assert_close(loss, (x * x).sum())


def test_a_gradient_that_is_an_input_is_returned_as_a_copy() -> None:
    """The gradient of a sum is the upstream gradient itself: a step hands on a copy, not an alias."""
    p = training_problem(
        "return x + 1", '{"upstream": 1, "grad_inputs": [0]}', "[torch.randn(n), torch.randn(n)]"
    )
    loaded = load(p)
    x, dy = loaded.get_inputs()
    _, dx = loaded.judged(build_model(loaded))(x, dy)
    torch.testing.assert_close(dx, dy)
    assert dx.untyped_storage().data_ptr() != dy.untyped_storage().data_ptr()


def test_a_backward_without_a_gradient_is_an_error_that_names_it() -> None:
    p = training_problem(
        "return x.detach() * self.w",
        '{"upstream": 1, "grad_inputs": [0]}',
        "[torch.randn(n, 3), torch.randn(n, 3)]",
        "self.w = nn.Parameter(torch.ones(3))",
    )
    loaded = load(p)
    with pytest.raises(RuntimeError, match="no gradient for input 0"):
        loaded.judged(build_model(loaded))(*loaded.get_inputs())


def test_upstream_gradients_must_match_the_outputs() -> None:
    step = Step(torch.nn.Identity(), Training(upstream=2, grad_inputs=(0,)))
    with pytest.raises(RuntimeError, match="1 tensor\\(s\\) for 2 upstream"):
        step(torch.randn(3), torch.randn(3), torch.randn(3))
    loss = Step(torch.nn.Identity(), Training(upstream=0, grad_inputs=(0,)))
    with pytest.raises(RuntimeError, match="scalar loss"):
        loss(torch.randn(3))
    ints = Step(torch.nn.Identity(), Training(upstream=1, grad_inputs=(0,)))
    with pytest.raises(RuntimeError, match="floating tensor"):
        ints(torch.arange(3), torch.randn(3))


def test_forward_only_runs_the_forward_alone() -> None:
    loaded = load(SCALED)
    step = loaded.judged(build_model(loaded))
    x, dy = loaded.get_inputs()
    (y,) = step.forward_only(x, dy)
    torch.testing.assert_close(y, step(x, dy)[0])


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ([1], "must be a dict"),
        ({"upstream": -1}, "must be a count"),
        ({"upstream": True}, "must be a count"),
        ({"grad_inputs": "x"}, "list of input positions"),
        ({"grad_inputs": [0, 0]}, "names an input twice"),
        ({"grads": [0]}, "unknown key"),
    ],
)
def test_malformed_training_metadata_is_refused_naming_the_file(value: object, message: str) -> None:
    with pytest.raises(ProblemError, match=message) as err:
        parse(value, "p.py")
    assert str(err.value).startswith("p.py:")


def test_the_format_reads_the_training_metadata() -> None:
    assert parse_problem(SCALED.code, "p.py").training == Training(upstream=1, grad_inputs=(0,))
    bad = SCALED.code.replace('"upstream": 1', '"upstream": "one"')
    with pytest.raises(ProblemError, match="KBENCH_TRAINING"):
        parse_problem(bad, "p.py")


def test_the_backward_answers_fail_an_honest_training_problem_and_catch_a_dead_gradient() -> None:
    result = sweep_problem(SCALED, SweepSettings(preset="full", seeds=(1000, 1001)))
    assert not result.error, result.error
    answers = {a.name: a for a in result.answers}
    assert {"zero-gradients", "forward-as-gradient"} <= set(answers)
    assert not result.passing
    # a problem whose compared gradient is zero: the answer that skips the backward passes it
    dead = training_problem(
        "return x * 0 + self.w",
        '{"upstream": 1, "grad_inputs": [0]}',
        "[torch.randn(n, 4), torch.randn(n, 4)]",
        "self.w = nn.Parameter(torch.randn(4))",
    )
    settings = SweepSettings(preset="full", seeds=(1000, 1001), answers=("zero-gradients",))
    assert sweep_problem(dead, settings).passing == []  # dw = sum(dy) is not zero
    only_x = dead.code.replace("self.w = nn.Parameter(torch.randn(4))", "self.w = torch.randn(4)")
    assert sweep_problem(Problem("test", 5, 2, "T", only_x), settings).passing == ["zero-gradients"]


def test_the_gradients_lint_finds_a_gradient_that_is_zero_everywhere_and_a_step_needs_one() -> None:
    p = training_problem(
        "return x * 0 + self.w",
        '{"upstream": 1, "grad_inputs": [0]}',
        "[torch.randn(n, 4), torch.randn(n, 4)]",
        "self.w = nn.Parameter(torch.randn(4))",
    )
    loaded = load(p)
    model = build_model(loaded)
    step = loaded.judged(model)
    inputs = loaded.get_inputs()
    outputs = list(step(*inputs))
    ctx = LintContext(loaded, model, "cpu", lambda i: list(step(*i)), inputs, inputs, outputs)
    reasons = RULES["gradients"](ctx)
    assert reasons == ["the gradient of input 0 is zero everywhere: a backward that does nothing would pass"]
    none = training_problem(
        "return x * 2", '{"upstream": 1, "grad_inputs": []}', "[torch.randn(n), torch.randn(n)]"
    )
    loaded = load(none)
    with pytest.raises(RuntimeError, match="no gradient to compare"):
        loaded.judged(build_model(loaded))(*loaded.get_inputs())
