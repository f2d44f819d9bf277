import json

import pytest
from typer.testing import CliRunner

from kbench.cli import app
from kbench.errors import ConfigError
from kbench.verify import checked_device, time_eager

runner = CliRunner()


def test_verify_cli_json_on_one_problem() -> None:
    result = runner.invoke(app, ["verify", "2/1", "--device", "cpu", "--strict", "--format", "json", "-q"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    (row,) = data["results"]
    assert row["problem_key"] == "kbench:2/1" and row["eager_ms"] > 0 and row["findings"] == []
    assert row["memory_method"].startswith("estimate")


def test_strict_turns_findings_into_exit_1(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "1_Ignores_y.py"
    path.write_text(
        "import torch\nimport torch.nn as nn\nKBENCH_TAGS = ['elementwise']\nKBENCH_PRESETS = {'small': {}}\n"
        "class Model(nn.Module):\n    def forward(self, x, y):\n        return x * 2\n"
        "def get_inputs():\n    return [torch.randn(4), torch.randn(4)]\ndef get_init_inputs():\n    return []\n"
    )
    loose = runner.invoke(app, ["verify", "--source", str(path), "--device", "cpu", "-q"])
    strict = runner.invoke(app, ["verify", "--source", str(path), "--device", "cpu", "--strict", "-q"])
    assert loose.exit_code == 0 and strict.exit_code == 1, strict.output


def test_cuda_without_gpu_is_a_config_error() -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(ConfigError, match="--device cpu"):
        checked_device("cuda")


def test_timer_takes_the_median() -> None:
    calls = []
    assert time_eager(lambda: calls.append(1), "cpu", budget_s=0.0) >= 0
    assert len(calls) == 2 + 3  # two warm-ups, three repeats minimum
