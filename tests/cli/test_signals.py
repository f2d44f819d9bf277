"""A killed evaluation leaves nothing behind: `kbench eval` and `kbench run`, hung in a candidate's forward,
sent SIGINT, SIGTERM, SIGHUP or SIGKILL. Two seconds later no process of that evaluation exists (the
workers, the candidate's own child, the warm starter) nor any of the folders kbench made for them in the
temporary folder, a catchable signal made kbench say what it kept
and exit with 128 + the signal, and the next evaluation finishes normally."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from evalfixtures import fixture_source, use_builds

from kbench.sandbox import procs

pytestmark = pytest.mark.slow
COMMON = ["--backend", "cpp", "--preset", "small", "--device", "cpu"]


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, shared_builds: Path) -> dict[str, str]:
    root = tmp_path_factory.mktemp("signals")
    cache = use_builds(root / "cache", shared_builds)  # the honest candidate's extension, built once
    return {**os.environ, "KBENCH_CACHE_DIR": str(cache), "KBENCH_STORE": str(root / "kbench.db")}


def _kbench(args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-c", "from kbench.cli import main; main()", *args]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # fmt: skip


def _hang_command(kind: str, tmp: Path) -> list[str]:
    if kind == "eval":
        (tmp / "hang.py").write_text(fixture_source("py_hang_signal.py"))
        return ["eval", "-p", "2/1", "-c", str(tmp / "hang.py"), "--no-static", "--no-timing", *COMMON]
    replay = tmp / "replay"
    replay.mkdir()
    (replay / "level_2_problem_1_sample_0_kernel.py").write_text(fixture_source("py_hang_signal.py"))
    return ["run", "-m", f"replay/{replay}", "--problems", "2/1", "--no-static", *COMMON]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGKILL])
@pytest.mark.parametrize("kind", ["eval", "run"])
def test_a_killed_evaluation_leaves_nothing_behind(
    kind: str, sig: signal.Signals, tmp_path: Path, env: dict[str, str]
) -> None:
    if kind == "run" and sig != signal.SIGKILL:
        # the reference's torch.compile baseline (tens of seconds on two cores) is timed once, under SIGKILL
        env = {**env, "KBENCH_BASELINES": "eager"}
    scratch = tmp_path / "tmp"  # the folders kbench makes for its processes (the starter's, each worker's)
    scratch.mkdir()
    proc = _kbench(_hang_command(kind, tmp_path), {**env, "TMPDIR": str(scratch)})
    owner = procs.ProcRef.of(proc.pid)
    assert owner is not None
    deadline = time.monotonic() + 240
    while (
        not (hung := procs.running(owner, proc.pid, "sleep 307"))
        and proc.poll() is None
        and time.monotonic() < deadline
    ):
        time.sleep(0.05)
    assert hung, proc.communicate()[1][-3000:]  # the candidate is in its forward: its child runs
    info = procs.info_of(hung[0])
    assert info is not None
    worker = info.ppid
    assert procs.owner_of(worker) == owner  # the hung worker carries its owner

    os.kill(proc.pid, sig)
    grace = time.monotonic() + 2.0  # kbench and every process it started are gone within 2 s
    while (proc.poll() is None or procs.belonging_to(owner, proc.pid)) and time.monotonic() < grace:
        time.sleep(0.05)
    assert proc.poll() is not None, "kbench still running 2 s after the signal"
    assert [f"{pid} {procs.command(pid)[:120]}" for pid in procs.belonging_to(owner, proc.pid)] == []
    # removed by kbench on a catchable signal, by its warm starter when kbench was killed
    assert sorted(p.name for p in scratch.iterdir() if p.name.startswith("kbench-")) == []
    _, err = proc.communicate()
    if sig == signal.SIGKILL:
        assert proc.returncode == -signal.SIGKILL
    else:
        assert proc.returncode == 128 + sig, err[-3000:]
        assert f"stopped: interrupted by {sig.name}" in err
        if kind == "run":
            assert "keeps 0 verdicts" in err and "--resume" in err

    (tmp_path / "honest.py").write_text(fixture_source("cpp_honest.py"))
    honest = ["eval", "-p", "2/1", "-c", str(tmp_path / "honest.py"), "--no-timing", "--format", "json"]
    after = subprocess.run(
        [sys.executable, "-c", "from kbench.cli import main; main()", *honest, *COMMON],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert after.returncode == 0 and '"status": "ok"' in after.stdout, after.stderr[-3000:]
