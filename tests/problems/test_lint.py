"""Each lint rule fires on a problem built to break it, and stays quiet on a sound one."""

from pathlib import Path

import pytest

from kbench.problems import source_problems
from kbench.verify import verify_problem

HEADER = """
import torch
import torch.nn as nn
n = 64
KBENCH_PRESETS = {"small": {"n": 8}}
KBENCH_TAGS = ["gemm-epilogue"]
def get_init_inputs():
    return [n]
"""
BODIES = {
    "sound": "class Model(nn.Module):\n    def __init__(self, n):\n        super().__init__()\n"
    "        self.lin = nn.Linear(n, n)\n    def forward(self, x, y):\n        return torch.relu(self.lin(x)) + y\n",
    "dead_parameter": "class Model(nn.Module):\n    def __init__(self, n):\n        super().__init__()\n"
    "        self.lin = nn.Linear(n, n)\n        self.unused = nn.Parameter(torch.ones(n))\n"
    "    def forward(self, x, y):\n        return self.lin(x) + y\n",
    "ignores_input": "class Model(nn.Module):\n    def __init__(self, n):\n        super().__init__()\n"
    "        self.lin = nn.Linear(n, n)\n    def forward(self, x, y):\n        return self.lin(x)\n",
    "constant": "class Model(nn.Module):\n    def __init__(self, n):\n        super().__init__()\n"
    "        self.lin = nn.Linear(n, n)\n    def forward(self, x, y):\n        return self.lin(x * 0 + 1) * (y * 0 + 1)\n",
    "random": "class Model(nn.Module):\n    def __init__(self, n):\n        super().__init__()\n"
    "        self.lin = nn.Linear(n, n)\n    def forward(self, x, y):\n        return self.lin(x) + y + torch.rand_like(y)\n",
    "rounding_noise": "class Model(nn.Module):\n    def __init__(self, n):\n        super().__init__()\n"
    "        self.lin = nn.Linear(n, n)\n    def forward(self, x, y):\n"
    "        out = self.lin(x) + y\n        return out * (1 + 1e-7 * torch.rand(()))\n",
    "nan": "class Model(nn.Module):\n    def __init__(self, n):\n        super().__init__()\n"
    "        self.lin = nn.Linear(n, n)\n    def forward(self, x, y):\n        return torch.log(self.lin(x) + y)\n",
}
INPUTS = "def get_inputs():\n    return [torch.randn(4, n), torch.randn(4, n)]\n"


def _problem(tmp_path: Path, body: str, header: str = HEADER):  # type: ignore[no-untyped-def]
    path = tmp_path / f"1_{body}.py"
    path.write_text(header + BODIES[body] + INPUTS)
    (problem,) = source_problems(str(path))
    return problem


def _rules(tmp_path: Path, body: str, header: str = HEADER) -> set[str]:
    return {f.rule for f in verify_problem(_problem(tmp_path, body, header), "small", "cpu").findings}


@pytest.mark.parametrize(
    ("body", "rule"),
    [
        ("dead_parameter", "uses-every-parameter"),
        ("ignores_input", "uses-every-input"),
        ("constant", "varies-with-seed"),
        ("random", "deterministic"),
        ("nan", "finite"),
    ],
)
def test_rule_fires(tmp_path: Path, body: str, rule: str) -> None:
    assert rule in _rules(tmp_path, body)


def test_sound_problem_has_no_findings(tmp_path: Path) -> None:
    result = verify_problem(_problem(tmp_path, "sound"), "small", "cpu")
    assert result.findings == () and result.passed(strict=True)
    assert result.eager_ms is not None and result.peak_bytes and result.full_peak_bytes


def test_rounding_level_nondeterminism_is_not_a_finding(tmp_path: Path) -> None:
    # float atomics that add in another order (scatter_add on a GPU) differ by ~1e-7 relative
    assert "deterministic" not in _rules(tmp_path, "rounding_noise")


def test_unknown_tag_and_oversized_full_preset(tmp_path: Path) -> None:
    header = HEADER.replace('"gemm-epilogue"', '"not-a-tag"').replace("n = 64", "n = 65536")
    rules = _rules(tmp_path, "sound", header)
    assert {"known-tags", "full-size"} <= rules  # 65536^2 fp32 weight = 16 GiB > 8 GiB


def test_broken_preset_is_reported(tmp_path: Path) -> None:
    header = HEADER.replace('{"small": {"n": 8}}', '{"small": {"n": 8}, "odd": {"n": -1}}')
    assert "presets" in _rules(tmp_path, "sound", header)
