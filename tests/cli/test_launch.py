"""The `kbench` entry point launches the warm starter before the CLI imports itself, and it is the very
starter the CLI then asks for (one per start-up environment: sandbox/starter.py)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from kbench import launch
from kbench.api.evaluator import prewarm
from kbench.config import resolve
from kbench.sandbox import starter


class FakeStarter:
    """Stands in for the zygote process: records what it was started for."""

    made: list[FakeStarter] = []

    def __init__(self, env: dict[str, str], optional_preload: bool = True) -> None:
        self.env, self.optional_preload = env, optional_preload
        FakeStarter.made.append(self)

    def failed(self) -> bool:
        return False

    def usable(self) -> bool:
        return True

    def alive(self) -> bool:
        return True

    def wait_ready(self, timeout: float = 0.0) -> bool:
        return True

    def close(self, wait_s: float = 0.0) -> None:
        pass


@pytest.fixture
def fake_starters(monkeypatch: pytest.MonkeyPatch) -> list[FakeStarter]:
    FakeStarter.made = []
    monkeypatch.setattr(starter, "Starter", FakeStarter)
    monkeypatch.setattr(starter, "_starters", {})
    monkeypatch.setattr(starter, "_retired", [])
    monkeypatch.setattr(starter, "_failed", {})
    for var in ("KBENCH_BACKEND", "KBENCH_DEVICE", "KBENCH_WORKER_START", "TRITON_INTERPRET"):
        monkeypatch.delenv(var, raising=False)
    return FakeStarter.made


CASES = [
    (["eval", "-p", "2/1", "-c", "c.py"], {}, True),
    (["eval", "-p", "2/1", "-c", "c.py", "--backend", "triton"], {}, True),
    (["eval", "-p", "2/1", "-c", "c.py", "-b", "triton", "--device", "cpu"], {}, True),
    (["eval", "-p", "2/1", "-c", "c.py", "--backend=triton", "--device=cuda:1"], {}, True),
    (["eval", "-p", "2/1", "-c", "c.py"], {"KBENCH_BACKEND": "triton"}, True),
    (["run", "-m", "replay/x", "--backend", "triton"], {"KBENCH_DEVICE": "cpu"}, False),
    (["serve", "--backend", "cpp"], {}, False),
    (["mcp", "--backend", "cpp"], {}, False),
]


@pytest.mark.parametrize("gpu", [True, False])
@pytest.mark.parametrize(("args", "env", "one_shot"), CASES)
def test_the_early_starter_is_the_one_the_cli_asks_for(
    fake_starters: list[FakeStarter],
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    env: dict[str, str],
    one_shot: bool,
    gpu: bool,
) -> None:
    real_exists = os.path.exists
    monkeypatch.setattr(os.path, "exists", lambda p: gpu if p == "/dev/nvidiactl" else real_exists(p))
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    guess = launch.early_start(args, os.environ)
    assert guess is not None and guess[1] is one_shot
    starter.prewarm(guess[0], one_shot=guess[1])
    assert len(fake_starters) == 1
    flags: dict[str, Any] = {
        "backend": launch._value(args, "--backend", "-b"),
        "device": launch._value(args, "--device"),
    }
    prewarm(resolve(None, flags), one_shot=one_shot)  # what the CLI does once it has its settings
    assert len(fake_starters) == 1, "the CLI launched a second starter: the early one was wasted"
    assert fake_starters[0].optional_preload is not one_shot


@pytest.mark.parametrize(
    "args",
    [
        ["--version"],
        ["problems"],
        ["eval", "--help"],
        ["eval", "-p", "2/1", "-c", "c.py", "--config", "run.toml"],
        ["eval", "-p", "2/1", "-c", "c.py", "--config=run.toml"],
    ],
)
def test_nothing_is_launched_early_where_the_arguments_cannot_tell(args: list[str]) -> None:
    assert launch.early_start(args, {}) is None


def test_a_spawning_configuration_gets_no_starter() -> None:
    assert launch.early_start(["eval", "-p", "2/1", "-c", "c.py"], {"KBENCH_WORKER_START": "spawn"}) is None


def test_the_console_script_and_python_m_use_the_early_entry() -> None:
    root = Path(__file__).resolve().parents[2]
    assert 'kbench = "kbench.launch:main"' in (root / "pyproject.toml").read_text()
    assert "from kbench.launch import main" in (root / "src" / "kbench" / "__main__.py").read_text()


@pytest.mark.slow
def test_python_m_kbench_eval_runs_one_starter_launched_before_the_cli(
    tmp_path: Path, shared_builds: Path
) -> None:
    """Through the real entry point: the early starter is the only one the evaluation starts."""
    import subprocess
    import sys
    import time

    from evalfixtures import fixture_source, use_builds

    from kbench.sandbox import procs

    (tmp_path / "honest.py").write_text(fixture_source("cpp_honest.py"))
    env = {**os.environ, "KBENCH_CACHE_DIR": str(use_builds(tmp_path / "cache", shared_builds))}
    env.pop("KBENCH_WORKER_START", None)
    cmd = [sys.executable, "-m", "kbench", "eval", "-p", "2/1", "-c", str(tmp_path / "honest.py"),
           "--backend", "cpp", "--preset", "small", "--device", "cpu", "--no-timing", "--format", "json"]  # fmt: skip
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    starters: set[int] = set()
    while proc.poll() is None:
        for pid in procs.all_pids():
            info = procs.info_of(pid)  # a starter is the host's child; the workers it forks, its own
            if info is not None and info.ppid == proc.pid and "kbench.sandbox.zygote" in procs.command(pid):
                starters.add(pid)
        time.sleep(0.02)
    out, err = proc.communicate()
    assert proc.returncode == 0, err[-3000:]
    assert '"status": "ok"' in out
    assert len(starters) == 1, starters


def test_a_starter_closed_before_it_is_ready_is_ended_at_once() -> None:
    """A command that ends early (a bad flag after the entry point launched its starter) does not wait for
    the starter's torch import: the starter has forked nothing yet and is killed."""
    import signal

    from kbench.sandbox.procs import worker_env

    early = starter.Starter(worker_env(), optional_preload=False)
    early.close()
    assert early.proc.returncode == -signal.SIGKILL
    assert not early.ready


def test_a_bad_flag_leaves_no_starter_behind(tmp_path: Path) -> None:
    import subprocess
    import sys

    from kbench.sandbox import procs

    cmd = [sys.executable, "-m", "kbench", "eval", "-p", "2/1", "--no-such-flag"]
    env = {**os.environ, "KBENCH_CACHE_DIR": str(tmp_path)}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    owner = procs.ProcRef.of(proc.pid)
    _, err = proc.communicate()
    assert proc.returncode == 2 and "no-such-flag" in err
    assert owner is not None and procs.belonging_to(owner) == []


EARLY_STOP = """
import os, signal, sys, time
from kbench import launch
launch.catch_early_stops()
from kbench.sandbox.starter import prewarm
prewarm(one_shot=True)  # as the entry point does before the CLI imports itself
os.kill(os.getpid(), int(sys.argv[1]))
time.sleep(30)
print("not stopped")
"""


@pytest.mark.parametrize("signum", ["SIGINT", "SIGTERM", "SIGHUP"])
def test_a_stop_while_the_cli_imports_itself_says_so_and_leaves_nothing(signum: str) -> None:
    """Before the CLI's own handlers are in place, a stop signal still ends the command with one line and
    128 + its number, and the starter launched early goes with it."""
    import signal
    import subprocess
    import sys
    import time

    from kbench.sandbox import procs

    sig = signal.Signals[signum]
    proc = subprocess.Popen(
        [sys.executable, "-c", EARLY_STOP, str(int(sig))],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    owner = procs.ProcRef.of(proc.pid)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig, err[-2000:]
    assert f"stopped: interrupted by {signum} while starting" in err and "not stopped" not in out
    assert "Traceback" not in err
    deadline = time.monotonic() + 2.0
    while owner is not None and procs.belonging_to(owner) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert owner is not None and procs.belonging_to(owner) == []


def test_the_entry_point_hands_the_signals_back_before_the_cli_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI finds the handlers it would have found without the entry point (and installs its own)."""
    import signal

    from kbench.sandbox.procs import STOP_SIGNALS

    before = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    seen: dict[int, object] = {}
    monkeypatch.setattr("sys.argv", ["kbench", "--version"])
    monkeypatch.setattr(
        "kbench.cli.main", lambda: seen.update({s: signal.getsignal(s) for s in STOP_SIGNALS})
    )
    launch.main()
    assert seen == before
    assert {sig: signal.getsignal(sig) for sig in STOP_SIGNALS} == before
