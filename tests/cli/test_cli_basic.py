import json
import subprocess
import sys

from typer.testing import CliRunner

import kbench
from kbench.cli import app

runner = CliRunner()


def test_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"kbench {kbench.__version__}"


def test_env_json_has_fingerprint_fields() -> None:
    result = runner.invoke(app, ["env", "--format", "json"])
    assert result.exit_code == 0, result.output
    info = json.loads(result.output)
    for key in ("torch", "python", "cpu", "gpu", "driver", "cuda", "nvcc", "ninja", "triton", "fingerprint"):
        assert key in info
    assert len(info["fingerprint"]) == 12


def test_console_script_error_exit_code_is_2() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", "from kbench.cli import main; main()", "show", "kbench:9/999"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert "no problem 9/999" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
