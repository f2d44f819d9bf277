import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import kbench
from kbench.cli import app
from kbench.errors import ConfigError
from kbench.problems import get_problem

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


def test_the_cli_starts_without_importing_torch() -> None:
    """`kbench eval` starts the warm starter before this process imports torch (seconds on a GPU host): the
    command modules and what they import at load time leave torch to the functions that use it."""
    code = "import sys, kbench.cli, kbench.api; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_console_script_error_exit_code_is_2() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", "from kbench.cli import main; main()", "show", "kbench:9/999"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert "no problem 9/999" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


SUITE_FILE = get_problem("2/1").path  # the embedded problem's own file
PY_RAISE = Path(__file__).parents[1] / "fixtures" / "eval" / "py_raise.py"


def test_a_problem_file_is_an_address() -> None:
    assert SUITE_FILE is not None
    shown = runner.invoke(app, ["show", SUITE_FILE, "--no-shapes", "--format", "json", "--preset", "small"])
    assert shown.exit_code == 0, shown.output
    data = json.loads(shown.stdout)
    assert data["name"] == "Gemm_ReLU" and data["key"] == get_problem(SUITE_FILE).key
    assert data["key"].startswith("file:Gemm_ReLU@") and data["key"].endswith(":2/1")  # no path in it
    assert data["sizes"]["batch_size"] == 16
    assert get_problem(f"{SUITE_FILE}:").code == get_problem(SUITE_FILE).code == get_problem("2/1").code


@pytest.mark.parametrize("start", ["fork", "spawn"])
def test_eval_without_a_gpu_takes_cpp_small_and_logs_no_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, start: str
) -> None:
    monkeypatch.setenv("KBENCH_DEVICE", "cpu")
    monkeypatch.setenv("KBENCH_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("KBENCH_WORKER_START", start)  # fork: from the warm starter, which preloads the worker
    args = ["eval", "--problem", str(SUITE_FILE), "--candidate", str(PY_RAISE), "--format", "json"]
    result = runner.invoke(app, [*args, "--no-timing", "--no-static"])
    assert result.exit_code == 0, result.output
    verdict = json.loads(result.stdout)
    assert (verdict["backend"], verdict["preset"], verdict["device"]) == ("cpp", "small", "cpu")
    assert verdict["status"] == "runtime_error" and "kernel launch failed" in verdict["message"]
    assert "Warning" not in verdict["log_tail"], verdict["log_tail"]  # the worker ran once, as itself
    assert "no GPU found: evaluating with the cpp backend and the `small` preset" in result.stderr


def test_eval_refuses_an_explicit_cuda_backend_without_a_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KBENCH_DEVICE", "cpu")
    result = runner.invoke(
        app, ["eval", "--problem", "2/1", "--candidate", str(PY_RAISE), "--backend", "cuda"]
    )
    assert isinstance(result.exception, ConfigError) and "no GPU for backend cuda" in str(result.exception)


def test_kbench_eval_leaves_no_folder_behind(tmp_path: Path) -> None:
    """`kbench eval` ends without the interpreter's teardown once its verdict is out: the warm starter's
    folder and every job's working folder go anyway (in the temporary folder it was given)."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp), "KBENCH_DEVICE": "cpu", "KBENCH_CACHE_DIR": str(tmp_path / "c")}
    args = ["eval", "--problem", "2/1", "--candidate", str(PY_RAISE), "--no-timing", "--no-static"]
    proc = subprocess.run([sys.executable, "-m", "kbench", *args], capture_output=True, text=True, env=env,
                          timeout=300)  # the console script's path: its warm starter launched first  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "runtime_error" in proc.stdout
    assert sorted(p.name for p in tmp.iterdir() if p.name.startswith("kbench-")) == []
