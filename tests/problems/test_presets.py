"""A preset a problem lacks runs it at its file's own sizes, with a note; a mistyped one is an error."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbench.errors import ProblemError
from kbench.problems import get_problem, load
from kbench.problems.loader import check_preset, preset_note, preset_used
from kbench.types import Problem

CODE = """
import torch
import torch.nn as nn

n = 64
PRESETS


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(n)]


def get_init_inputs():
    return []
"""


def _problem(tmp_path: Path, name: str, presets: str = "") -> Problem:
    path = tmp_path / f"{name}.py"
    path.write_text(CODE.replace("PRESETS", f"KBENCH_PRESETS = {presets}" if presets else ""))
    return get_problem(str(path))


@pytest.mark.parametrize("preset", ["small", "medium", "tiny"])
def test_a_missing_preset_runs_at_the_files_own_sizes_with_a_note(tmp_path: Path, preset: str) -> None:
    p = _problem(tmp_path, "upstream")
    check_preset([p], preset)  # not a typo: no error
    assert load(p, preset).sizes == load(p).sizes == {"n": 64}
    assert preset_used(p, preset) == "full"
    assert preset_note(p, preset) == f"{p.key} has no `{preset}` preset: it runs at the sizes its file sets"


def test_a_preset_some_problem_of_the_selection_has_is_no_typo(tmp_path: Path) -> None:
    has = _problem(tmp_path, "has", '{"medium": {"n": 16}}')
    lacks = _problem(tmp_path, "lacks")
    check_preset([has, lacks], "medium")
    assert (load(has, "medium").sizes, preset_used(has, "medium"), preset_note(has, "medium")) == (
        {"n": 16},
        "medium",
        "",
    )
    assert load(lacks, "medium").sizes == {"n": 64} and preset_used(lacks, "medium") == "full"


def test_a_missing_preset_runs_at_the_full_presets_sizes(tmp_path: Path) -> None:
    p = _problem(tmp_path, "own_full", '{"full": {"n": 32}, "small": {"n": 4}}')
    assert load(p, "medium").sizes == load(p, "full").sizes == {"n": 32}


@pytest.mark.parametrize(
    ("preset", "meant"), [("smal", "small"), ("Small", "small"), ("ful", "full"), ("mediun", "medium")]
)
def test_a_likely_typo_lists_the_presets_that_exist(tmp_path: Path, preset: str, meant: str) -> None:
    chosen = [
        _problem(tmp_path, "a", '{"small": {"n": 8}}'),
        _problem(tmp_path, "b", '{"medium": {"n": 16}}'),
    ]
    with pytest.raises(ProblemError) as caught:
        check_preset(chosen, preset)
    assert str(caught.value) == (
        f"no selected problem has a preset {preset!r}; did you mean {meant!r}? (presets: full, medium, small)"
    )
