"""Hidden shapes (problems/hidden.py): which sizes are drawn, where, and that every problem of the suite
either runs at drawn sizes or says why it has none."""

from __future__ import annotations

import random
import textwrap

import pytest
import torch

from kbench.errors import ProblemError
from kbench.problems import build_model, load, select
from kbench.problems.hidden import HIDDEN, declared_reason, draw, scalable_sizes, with_preset
from kbench.problems.lint import flat_tensors
from kbench.types import Problem

CODE = """
import torch
import torch.nn as nn

batch = 64
width = 48
wide = 2 * width
out_features = 40
flag = True
KBENCH_PRESETS = {"small": {"batch": 8, "width": 12}}
{extra}

class Model(nn.Module):
    def __init__(self, wide, out_features):
        super().__init__()
        self.linear = nn.Linear(wide, out_features)

    def forward(self, x):
        return self.linear(x)

def get_inputs():
    return [torch.randn(batch, wide) if flag else None]

def get_init_inputs():
    return [wide, out_features]
"""


def problem(extra: str = "") -> Problem:
    return Problem("test", 1, 1, "T", textwrap.dedent(CODE).replace("{extra}", extra))


def test_the_sizes_that_shape_the_inputs_are_the_scalable_ones() -> None:
    """`wide` is derived (2 * width): its root is drawn; out_features only builds the model; flag is a bool."""
    assert scalable_sizes(problem(), "full") == {"batch": 64, "width": 48}
    assert scalable_sizes(problem(), "small") == {"batch": 8, "width": 12}


@pytest.mark.parametrize("seed", range(5))
def test_draws_are_smaller_other_than_every_preset_and_run(seed: int) -> None:
    p = problem()
    for preset, base in (("full", {"batch": 64, "width": 48}), ("small", {"batch": 8, "width": 12})):
        hidden = draw(p, preset, random.Random(seed))
        sizes = dict(hidden.sizes)
        assert set(sizes) == set(base) and hidden.available and not hidden.reason
        assert all((base[n] + 1) // 2 <= sizes[n] < base[n] for n in base), sizes
        assert sizes not in ({"batch": 64, "width": 48}, {"batch": 8, "width": 12})
        loaded = load(with_preset(p, dict(hidden.overrides)), HIDDEN)
        (out,) = flat_tensors(build_model(loaded)(*loaded.get_inputs()))
        assert tuple(out.shape) == (sizes["batch"], 40)


def test_without_a_seeded_generator_each_draw_is_fresh() -> None:
    p = Problem("test", 1, 1, "T", problem().code.replace("batch = 64", "batch = 4096"))
    assert len({dict(draw(p, "full").sizes)["batch"] for _ in range(4)}) > 1  # 2048 values to draw from


def test_a_problem_says_why_it_has_no_hidden_sizes() -> None:
    fixed = problem().code.replace("torch.randn(batch, wide)", "torch.randn(7, 96)")
    hidden = draw(Problem("test", 1, 1, "T", fixed), "full")
    assert not hidden.available and "get_inputs reads no" in hidden.reason
    declared = draw(problem('KBENCH_HIDDEN = "the kernel is defined for 64 rows"'), "full")
    assert declared.reason == "the kernel is defined for 64 rows" and not declared.sizes
    with pytest.raises(ProblemError, match="KBENCH_HIDDEN must be a non-empty string"):
        declared_reason(problem("KBENCH_HIDDEN = 3"))


def test_sizes_that_cannot_change_keep_their_value() -> None:
    """A view that needs width == 48 at every batch: width stays, batch is drawn."""
    code = problem().code.replace("return self.linear(x)", "return self.linear(x.view(x.shape[0], 96))")
    hidden = draw(Problem("test", 1, 1, "T", code), "full", random.Random(0))
    assert [n for n, _ in hidden.sizes] == ["batch"] and "width" not in dict(hidden.overrides)


def test_the_hidden_preset_keeps_the_evaluated_presets_other_overrides() -> None:
    p = Problem("test", 1, 1, "T", problem().code.replace('"width": 12}', '"width": 12, "out_features": 5}'))
    hidden = draw(p, "small", random.Random(1))
    assert dict(hidden.overrides)["out_features"] == 5


PROBLEMS = select("kbench")


@pytest.mark.parametrize("p", PROBLEMS, ids=[p.key for p in PROBLEMS])
def test_every_problem_runs_at_hidden_sizes_or_says_why(p: Problem) -> None:
    """For real, on the CPU (the meta device does not see value-dependent failures)."""
    hidden = draw(p, "small", random.Random(7))
    if not hidden.available:
        assert hidden.reason
        return
    shown = load(p, "small")
    loaded = load(with_preset(p, dict(hidden.overrides)), HIDDEN)
    torch.manual_seed(0)
    with torch.no_grad():
        ref = flat_tensors(shown.judged(build_model(shown))(*shown.get_inputs()))  # a training step too
        out = flat_tensors(loaded.judged(build_model(loaded))(*loaded.get_inputs()))
    assert [t.shape for t in out] != [t.shape for t in ref] or dict(hidden.sizes)
    assert all(bool(torch.isfinite(t).all()) for t in out if t.is_floating_point())
