"""The GPU lease: processes take turns, the marker appears, and the host's clock starts at the lease."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kbench.sandbox import lease
from kbench.sandbox.host import _wait

HOLDER = """
import json, sys, time
from pathlib import Path
from kbench.sandbox import lease
jobdir = Path(sys.argv[1]); jobdir.mkdir(parents=True, exist_ok=True)
waited = lease.acquire("test-gpu", jobdir)
start = time.time(); time.sleep(1.0); end = time.time()
(jobdir / "span.json").write_text(json.dumps([start, end, waited]))
"""


def test_processes_take_turns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(lease.DIR_ENV, str(tmp_path / "leases"))
    jobs = [tmp_path / f"job{i}" for i in range(3)]
    procs = [subprocess.Popen([sys.executable, "-c", HOLDER, str(j)]) for j in jobs]
    assert [p.wait(timeout=60) for p in procs] == [0, 0, 0]
    spans = sorted(json.loads((j / "span.json").read_text()) for j in jobs)
    for (_, end, _), (start, _, _) in zip(spans, spans[1:], strict=False):
        assert start >= end - 0.01  # one holder at a time
    assert max(w for _, _, w in spans) > 0.5  # somebody waited for the others
    assert all((j / lease.LEASE_FILE).exists() for j in jobs)


RELEASER = """
import os, sys, time
from pathlib import Path
from kbench.sandbox import lease
jobdir = Path(sys.argv[1]); jobdir.mkdir(parents=True, exist_ok=True)
lease.acquire("test-gpu", jobdir)
child = os.fork()  # a forked child shares the lock, as an Inductor compile worker would
if child == 0:
    time.sleep(30); os._exit(0)
lease.release()
(jobdir / "released").write_text(str(child))
time.sleep(30)
"""


def test_release_hands_the_lease_on_while_the_holder_lives(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The reference worker releases its lease before writing files and exiting: the next job gets it at
    once, even though the releaser and a child it forked are still alive."""
    import os
    import signal

    monkeypatch.setenv(lease.DIR_ENV, str(tmp_path / "leases"))
    holder = subprocess.Popen([sys.executable, "-c", RELEASER, str(tmp_path / "a")])
    try:
        marker = tmp_path / "a" / "released"
        deadline = time.monotonic() + 60
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.exists() and holder.poll() is None
        (tmp_path / "b").mkdir()
        t0 = time.monotonic()
        waited = lease.acquire("test-gpu", tmp_path / "b")
        assert waited < 1.0 and time.monotonic() - t0 < 1.0
        lease.release()
    finally:
        holder.kill()
        holder.wait()
        if marker.exists():
            os.kill(int(marker.read_text()), signal.SIGKILL)


def _sleeper(jobdir: Path, before_lease: float, after_lease: float) -> subprocess.Popen[bytes]:
    code = (
        f"import time, pathlib; time.sleep({before_lease}); "
        f"pathlib.Path({str(jobdir)!r}, 'lease').write_text('1'); time.sleep({after_lease})"
    )
    return subprocess.Popen([sys.executable, "-c", code])


def test_the_limit_runs_from_the_lease(tmp_path: Path) -> None:
    proc = _sleeper(tmp_path, before_lease=1.5, after_lease=0.3)
    assert _wait(proc, tmp_path, timeout_s=1.2, t0=time.monotonic(), leased=True)  # 1.8 s in all: fine

    (tmp_path / "lease").unlink()
    proc = _sleeper(tmp_path, before_lease=0.2, after_lease=30)
    t0 = time.monotonic()
    assert not _wait(proc, tmp_path, timeout_s=1.0, t0=t0, leased=True)  # a hang after the lease
    assert 1.0 <= time.monotonic() - t0 < 5
    proc.kill()
    proc.wait()


def test_jobs_without_a_lease_keep_the_plain_limit(tmp_path: Path) -> None:
    proc = _sleeper(tmp_path, before_lease=3.0, after_lease=0.0)
    t0 = time.monotonic()
    assert not _wait(proc, tmp_path, timeout_s=1.0, t0=t0, leased=False)
    assert time.monotonic() - t0 < 2.5  # not at the lease (3 s)
    proc.kill()
    proc.wait()


def test_every_gpu_worker_but_a_build_takes_the_lease() -> None:
    assert lease.required("candidate", "cuda:1") and lease.required("reference", "cuda")
    assert not lease.required("build", "cuda:0") and not lease.required("candidate", "cpu")
