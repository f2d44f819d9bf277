"""`kbench eval` on a problem that lacks the preset asked for: it runs at the file's own sizes, says so
in `kbench run`'s words, and its verdict names the preset that ran; a mistyped preset is an error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kbench.cli import app
from kbench.errors import ProblemError
from kbench.problems import get_problem

PY_RAISE = Path(__file__).parents[1] / "fixtures" / "eval" / "py_raise.py"
UPSTREAM = """
import torch
import torch.nn as nn

batch_size = 4
in_features = 8
out_features = 8


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.relu(self.linear(x))


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
"""


@pytest.fixture
def upstream_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KBENCH_DEVICE", "cpu")
    monkeypatch.setenv("KBENCH_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "level2" / "1_Linear_ReLU.py"
    path.parent.mkdir()
    path.write_text(UPSTREAM)
    return path


@pytest.mark.parametrize("preset", [[], ["--preset", "small"], ["--preset", "medium"]])
def test_eval_notes_the_missing_preset_and_records_the_one_that_ran(
    upstream_file: Path, preset: list[str]
) -> None:
    args = [
        "eval",
        "-p",
        str(upstream_file),
        "-c",
        str(PY_RAISE),
        "--no-timing",
        "--no-static",
        "--format",
        "json",
    ]
    result = CliRunner().invoke(app, [*args, *preset])
    assert result.exit_code == 0, result.output
    verdict = json.loads(result.stdout)
    assert (verdict["status"], verdict["preset"]) == ("runtime_error", "full")
    asked = preset[1] if preset else "small"
    key = get_problem(str(upstream_file)).key
    assert f"note: {key} has no `{asked}` preset: it runs at the sizes its file sets" in result.stderr


def test_eval_refuses_a_mistyped_preset_listing_the_presets(upstream_file: Path) -> None:
    args = ["eval", "-p", str(upstream_file), "-c", str(PY_RAISE), "--preset", "smal"]
    result = CliRunner().invoke(app, args)
    assert isinstance(result.exception, ProblemError)
    assert "no selected problem has a preset 'smal'; did you mean 'small'? (presets: full, small)" in str(
        result.exception
    )
