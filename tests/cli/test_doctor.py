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


@pytest.mark.xdist_group("doctor-kill")  # `doctor --kill` ends every stale process here: one at a time
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

        cache = ["--cache-dir", str(tmp_path / "cache")]
        listed = runner.invoke(app, ["doctor", *cache, "--format", "json"])
        assert listed.exit_code == 1, listed.output
        report = json.loads(listed.output)
        rows = {row["pid"]: row for row in report["processes"]}
        assert rows[stale.pid]["stale"] and not rows[live.pid]["stale"]
        assert rows[live.pid]["owner"] == os.getpid()
        assert [(s["name"], s["state"]) for s in report["leases"]] == [("doctor-gpu", "stale")]
        child = int((tmp_path / "child").read_text())
        assert report["leases"][0]["lock_pids"] == [child]  # the leftover, as the kernel shows it

        ended = runner.invoke(app, ["doctor", "--kill", *cache, "--format", "json"])
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


def _sealed(folder: Path, files: dict[str, bytes]) -> Path:
    from kbench.backends.buildcache import seal

    for rel, data in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(data)
    seal(folder, list(files))
    return folder


@pytest.mark.xdist_group("doctor-kill")  # its --kill would end the other test's stale process
def test_doctor_finds_and_removes_cache_entries_that_fail_their_digest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kbench.referee.builds import STAGING

    monkeypatch.setenv(lease.DIR_ENV, str(tmp_path / "leases"))

    builds = tmp_path / "cache" / "builds"
    good = _sealed(builds / "a1b2c3", {"k.so": b"binary", "sub/k.o": b"object"})
    changed = _sealed(builds / "d4e5f6", {"k.so": b"binary"})
    (changed / "k.so").write_bytes(b"planted")  # a binary changed after its builder sealed it
    unsealed = builds / "0a0b0c"
    unsealed.mkdir()
    (unsealed / "k.so").write_bytes(b"no manifest")
    shim = _sealed(builds / ".shim" / "ff00", {"torch/extension.h": b"// shim"})
    (shim / "torch" / "extension.h").write_text("#define planted 1")
    dead = _dead_ref().pid
    orphan = builds / STAGING / f"a1b2c3-{dead}-0f0f"  # a killed builder's staging folder
    orphan.mkdir(parents=True)
    live = builds / STAGING / f"a1b2c3-{os.getpid()}-0e0e"  # a build in progress: not touched
    live.mkdir()
    args = ["doctor", "--cache-dir", str(tmp_path / "cache"), "--format", "json"]

    listed = runner.invoke(app, args)
    report = json.loads(listed.output)["cache"]
    assert listed.exit_code == 1 and report["verified"] == 1
    assert sorted((e["kind"], Path(e["path"]).name) for e in report["bad"]) == sorted(
        [("build", "d4e5f6"), ("build", "0a0b0c"), ("shim", "ff00"), ("staging", orphan.name)]
    )

    removed = runner.invoke(app, [*args, "--kill"])
    assert len(json.loads(removed.output)["removed"]) == 4
    assert good.is_dir() and live.is_dir() and not changed.exists() and not orphan.exists()
    again = runner.invoke(app, args)
    assert again.exit_code == 0 and json.loads(again.output)["cache"] == {
        "folder": str(tmp_path / "cache"),
        "verified": 1,
        "bad": [],
    }
