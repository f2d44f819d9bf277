"""`kbench doctor`: lists kbench's processes and leases, tells stale from live, and ends only stale ones."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kbench.cli import app
from kbench.sandbox import lease, procs

runner = CliRunner()


def _dead_ref() -> procs.ProcRef:
    ghost = subprocess.Popen([sys.executable, "-c", "pass"])
    ref = procs.ProcRef.of(ghost.pid)
    ghost.wait()
    assert ref is not None and not ref.alive()
    return ref


def _sleeper(owner: procs.ProcRef) -> subprocess.Popen[bytes]:
    env = {**os.environ, procs.OWNER_ENV: str(owner)}
    return subprocess.Popen(["sleep", "120"], env=env, start_new_session=True)


HOLDER = """
import os, sys, time
from pathlib import Path
from kbench.sandbox import lease
lease.acquire("doctor-gpu", Path(sys.argv[1]))
child = os.fork()
if child == 0:
    time.sleep(120); os._exit(0)
Path(sys.argv[1], "child").write_text(str(child))
Path(sys.argv[1], "ready").touch()
time.sleep(120)
"""


def test_doctor_ends_stale_processes_and_leases_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(lease.DIR_ENV, str(tmp_path / "leases"))
    stale = _sleeper(_dead_ref())
    live = _sleeper(procs.self_ref())
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path)], start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "ready").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        holder.kill()
        holder.wait()  # the lease's taker is gone, the child it forked still holds the lock

        listed = runner.invoke(app, ["doctor", "--format", "json"])
        assert listed.exit_code == 1, listed.output
        report = json.loads(listed.output)
        rows = {row["pid"]: row for row in report["processes"]}
        assert rows[stale.pid]["stale"] and not rows[live.pid]["stale"]
        assert rows[live.pid]["owner"] == os.getpid()
        assert [(s["name"], s["state"]) for s in report["leases"]] == [("doctor-gpu", "stale")]
        child = int((tmp_path / "child").read_text())
        assert report["leases"][0]["lock_pids"] == [child]  # the leftover, as the kernel shows it

        ended = runner.invoke(app, ["doctor", "--kill", "--format", "json"])
        assert ended.exit_code == 0, ended.output
        report = json.loads(ended.output)
        assert stale.pid in report["ended"] and live.pid not in report["ended"]
        assert report["reclaimed"] == ["doctor-gpu"]
        assert stale.wait(timeout=5) < 0 and live.poll() is None
        assert [(s["state"], s["lock_pids"]) for s in report["leases"]] == [("free", [])]
    finally:
        for proc in (stale, live, holder):
            proc.kill()
            proc.wait()
