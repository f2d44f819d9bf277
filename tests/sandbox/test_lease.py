"""The GPU lease: processes take turns, a dead owner's lease is reclaimed, a live one's wait is bounded;
and the host's per-phase budgets."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kbench.sandbox import lease, procs
from kbench.sandbox.host import _wait

HOLDER = """
import json, sys, time
from pathlib import Path
from kbench.sandbox import lease
jobdir = Path(sys.argv[1]); jobdir.mkdir(parents=True, exist_ok=True)
waited = lease.acquire("test-gpu", jobdir)
holder = lease.read_holder("test-gpu")
start = time.time(); time.sleep(1.0); end = time.time()
(jobdir / "span.json").write_text(json.dumps([start, end, waited, holder.job]))
"""


def test_processes_take_turns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(lease.DIR_ENV, str(tmp_path / "leases"))
    jobs = [tmp_path / f"job{i}" for i in range(3)]
    procs = [subprocess.Popen([sys.executable, "-c", HOLDER, str(j)]) for j in jobs]
    assert [p.wait(timeout=60) for p in procs] == [0, 0, 0]
    spans = sorted(json.loads((j / "span.json").read_text()) for j in jobs)
    for (_, end, _, _), (start, _, _, _) in zip(spans, spans[1:], strict=False):
        assert start >= end - 0.01  # one holder at a time
    assert max(w for _, _, w, _ in spans) > 0.5  # somebody waited for the others
    assert sorted(job for *_, job in spans) == sorted(str(j) for j in jobs)  # each wrote its own record


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


def _phased(jobdir: Path, steps: list[tuple[str, float]]) -> subprocess.Popen[bytes]:
    """A process that announces each phase of `steps` and then sleeps its seconds."""
    jobdir.mkdir(parents=True, exist_ok=True)
    code = "import sys, time, pathlib\nfrom kbench.sandbox.protocol import announce\n"
    for phase, seconds in steps:
        code += f"announce(pathlib.Path({str(jobdir)!r}), {phase!r}); time.sleep({seconds})\n"
    return subprocess.Popen([sys.executable, "-c", code])


def test_each_phase_has_its_own_budget(tmp_path: Path) -> None:
    budgets = {"lease": 30.0, "load": 1.5, "correctness": 1.5}
    proc = _phased(tmp_path / "a", [("lease", 2.0), ("load", 0.5), ("correctness", 0.5)])
    assert _wait(proc, tmp_path / "a", budgets, time.monotonic()) is None  # 3 s in all, each phase in time

    proc = _phased(tmp_path / "b", [("lease", 0.2), ("load", 0.2), ("correctness", 30.0)])
    t0 = time.monotonic()
    assert _wait(proc, tmp_path / "b", budgets, t0) == ("correctness", 1.5)  # the hang names its phase
    assert 1.5 <= time.monotonic() - t0 < 6
    proc.kill()
    proc.wait()


def test_phases_only_move_forward(tmp_path: Path) -> None:
    """A candidate that writes the phase file itself cannot restart a phase's clock: going back is ignored."""
    budgets = {"load": 1.5, "correctness": 1.5}
    steps = [("load", 0.1), ("correctness", 1.0), ("load", 1.0), ("correctness", 30.0)]
    proc = _phased(tmp_path, steps)
    t0 = time.monotonic()
    assert _wait(proc, tmp_path, budgets, t0) == ("correctness", 1.5)
    assert time.monotonic() - t0 < 4.5  # 1.5 s from the first correctness, not from the repeat
    proc.kill()
    proc.wait()


def test_a_job_without_phases_keeps_one_limit(tmp_path: Path) -> None:
    proc = _phased(tmp_path, [("load", 30.0)])
    t0 = time.monotonic()
    assert _wait(proc, tmp_path, 1.0, t0) == ("start", 1.0)  # a float: one budget, announcements ignored
    assert time.monotonic() - t0 < 4
    proc.kill()
    proc.wait()


LEFTOVER = """
import os, sys, time
from pathlib import Path
from kbench.sandbox import lease
jobdir = Path(sys.argv[1]); jobdir.mkdir(parents=True, exist_ok=True)
lease.acquire("test-gpu", jobdir)
child = os.fork()  # the child shares the lock, as a candidate's background process would
if child == 0:
    time.sleep(120); os._exit(0)
(jobdir / "child.tmp").write_text(str(child))
os.replace(jobdir / "child.tmp", jobdir / "child")  # whole when the test sees it
time.sleep(120)
"""


def _until(path: Path, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert path.exists()


def _orphaned_leftover(jobdir: Path, new_session: bool) -> int:
    """Run LEFTOVER in `jobdir` and kill it once its child shares the lock: the pid of that child, which
    holds the lease for a taker that is gone."""
    holder = subprocess.Popen([sys.executable, "-c", LEFTOVER, str(jobdir)], start_new_session=new_session)
    _until(jobdir / "child")
    holder.kill()
    holder.wait()
    return int((jobdir / "child").read_text())


def _ended(pid: int) -> bool:
    info = procs.info_of(pid)
    return info is None or not info.alive


def test_a_lease_whose_taker_died_is_reclaimed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker that took the lease was killed but a child it forked still holds the lock file: the
    next waiter ends the child and takes the lease at once, instead of waiting for ever."""
    monkeypatch.setenv(lease.DIR_ENV, str(tmp_path / "leases"))
    child = _orphaned_leftover(tmp_path / "a", new_session=False)
    assert procs.info_of(child) is not None  # the leftover lives on and holds the lock
    (tmp_path / "b").mkdir()
    t0 = time.monotonic()
    lease.acquire("test-gpu", tmp_path / "b", wait_s=20.0)
    assert time.monotonic() - t0 < 5.0
    time.sleep(0.1)
    assert _ended(child)  # ended by the waiter
    assert lease.read_holder("test-gpu").job == str(tmp_path / "b")
    lease.release()


def test_a_lease_whose_kbench_process_died_is_reclaimed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker lives on (it was not bound to its parent) but the kbench process that owned it is gone:
    the waiter ends the worker's session and takes the lease."""
    monkeypatch.setenv(lease.DIR_ENV, str(tmp_path / "leases"))
    ghost = subprocess.Popen([sys.executable, "-c", "pass"])
    owner = procs.ProcRef.of(ghost.pid)
    ghost.wait()  # the owner: dead, and its pid's start time recorded
    assert owner is not None and not owner.alive()
    env = {**os.environ, procs.OWNER_ENV: str(owner)}
    holder = subprocess.Popen(
        [sys.executable, "-c", LEFTOVER, str(tmp_path / "a")], env=env, start_new_session=True
    )
    try:
        _until(tmp_path / "a" / "child")
        t0 = time.monotonic()
        lease.acquire("test-gpu", tmp_path / "b", wait_s=20.0)
        assert time.monotonic() - t0 < 5.0
        assert holder.wait(timeout=5) == -signal.SIGKILL
        lease.release()
    finally:
        holder.kill()
        holder.wait()


def test_a_live_holder_makes_the_wait_fail_with_its_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(lease.DIR_ENV, str(tmp_path / "leases"))
    env = {**os.environ, procs.OWNER_ENV: str(procs.self_ref())}  # owned by this live test process
    holder = subprocess.Popen([sys.executable, "-c", LEFTOVER, str(tmp_path / "a")], env=env)
    try:
        _until(tmp_path / "a" / "child")
        t0 = time.monotonic()
        with pytest.raises(lease.LeaseTimeout) as err:
            lease.acquire("test-gpu", tmp_path / "b", wait_s=1.0)
        assert 1.0 <= time.monotonic() - t0 < 5.0
        message = str(err.value)
        assert f"pid {holder.pid}" in message and f"kbench pid {os.getpid()} (alive)" in message
        assert "kbench doctor --kill" in message and "\n" not in message
        assert holder.poll() is None  # a live owner's worker is never touched
    finally:
        holder.kill()
        holder.wait()
        child = tmp_path / "a" / "child"
        if child.exists():
            os.kill(int(child.read_text()), signal.SIGKILL)


def test_every_gpu_worker_but_a_build_takes_the_lease() -> None:
    assert lease.required("candidate", "cuda:1") and lease.required("reference", "cuda")
    assert not lease.required("build", "cuda:0") and not lease.required("candidate", "cpu")


WAITER = """
import os, sys, time
fd = os.open(sys.argv[1], os.O_CREAT | os.O_RDWR, 0o666)  # open, as a worker trying the lock has it
open(sys.argv[2], "w").close()
time.sleep(600)
"""


def test_reclaiming_a_stale_lease_spares_the_other_waiters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another worker waiting for the GPU has the lock file open too: the waiter that breaks a stale lease
    ends the dead worker's leftovers, never that worker."""
    monkeypatch.setenv(lease.DIR_ENV, str(tmp_path / "leases"))
    child = _orphaned_leftover(tmp_path / "a", new_session=True)
    lock = tmp_path / "leases" / "test-gpu.lock"
    other = subprocess.Popen(
        [sys.executable, "-c", WAITER, str(lock), str(tmp_path / "waiting")], start_new_session=True
    )
    try:
        _until(tmp_path / "waiting")
        (tmp_path / "b").mkdir()
        lease.acquire("test-gpu", tmp_path / "b", wait_s=20.0)
        time.sleep(0.1)
        assert _ended(child)  # the leftover was ended
        assert other.poll() is None, f"the other waiter ended: {other.returncode}"  # it was not ended
        lease.release()
    finally:
        other.kill()
        other.wait()


@pytest.mark.parametrize("record", [True, False], ids=["with-record", "without-record"])
def test_leftovers_are_told_from_waiters_by_the_lock_they_hold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, record: bool
) -> None:
    """The dead taker's child, another waiter and this test all share one session (as when the whole run
    sits in the session of a launcher that never called setsid, where every session id is 0): the waiter
    that breaks the lease ends the child, which shares the locked file description, and spares the other
    waiter, which only has the file open, with or without the holder's record."""
    monkeypatch.setenv(lease.DIR_ENV, str(tmp_path / "leases"))
    child = _orphaned_leftover(tmp_path / "a", new_session=False)
    if not record:
        (tmp_path / "leases" / "test-gpu.holder").unlink()
    lock = tmp_path / "leases" / "test-gpu.lock"
    other = subprocess.Popen([sys.executable, "-c", WAITER, str(lock), str(tmp_path / "waiting")])
    try:
        _until(tmp_path / "waiting")
        assert [pid for pid, _ in procs.lock_holders(lock)] == [child]  # the waiter is not a holder
        (tmp_path / "b").mkdir()
        t0 = time.monotonic()
        lease.acquire("test-gpu", tmp_path / "b", wait_s=20.0)
        assert time.monotonic() - t0 < 5.0
        time.sleep(0.1)
        assert _ended(child)  # the leftover was ended
        assert other.poll() is None, f"the other waiter ended: {other.returncode}"
        assert [pid for pid, _ in procs.lock_holders(lock)] == [os.getpid()]
        lease.release()
    finally:
        other.kill()
        other.wait()
        procs.kill(child)


def test_a_live_taker_is_never_reclaimed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A lock taken by a live process whose record is missing (it has not written one yet) is not stale."""
    monkeypatch.setenv(lease.DIR_ENV, str(tmp_path / "leases"))
    env = {**os.environ, procs.OWNER_ENV: str(procs.self_ref())}
    holder = subprocess.Popen([sys.executable, "-c", LEFTOVER, str(tmp_path / "a")], env=env)
    try:
        _until(tmp_path / "a" / "child")
        (tmp_path / "leases" / "test-gpu.holder").unlink()
        assert lease.reclaim("test-gpu") is None
        assert holder.poll() is None
        assert sorted(pid for pid, _ in procs.lock_holders(tmp_path / "leases" / "test-gpu.lock")) == sorted(
            [holder.pid, int((tmp_path / "a" / "child").read_text())]
        )
    finally:
        holder.kill()
        holder.wait()
        procs.kill(int((tmp_path / "a" / "child").read_text()))


def test_session_zero_is_nobodys_worker() -> None:
    """Processes of a launcher that never called setsid, and kernel threads, are in session 0: no kill of
    a session or listing of its members may take them for a worker's (`killpg(0)` is one's own group)."""
    assert procs.members(0) == []
    assert procs.end_session(0) is False


FORGER = """
import json, sys, time
from pathlib import Path
from kbench.sandbox import lease
jobdir = Path(sys.argv[1]); jobdir.mkdir(parents=True, exist_ok=True)
lease.acquire("test-gpu", jobdir)
record = Path(lease.lease_dir(), "test-gpu.holder")
holder = json.loads(record.read_text())
holder.update(json.loads(sys.argv[2]))  # what a candidate running in the worker could write there
record.write_text(json.dumps(holder))
(jobdir / "forged").write_text("")
time.sleep(120)
"""


@pytest.mark.parametrize("forge", ["session", "worker"])
def test_a_forged_holder_record_ends_no_other_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, forge: str
) -> None:
    """A candidate's worker holds the lease and rewrites the record: naming another process's session
    (its owner said dead, so that waiters break the lease), or another process as the worker. A waiter
    ends at most the forger itself, never the process named."""
    monkeypatch.setenv(lease.DIR_ENV, str(tmp_path / "leases"))
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
    ghost = subprocess.Popen([sys.executable, "-c", "pass"])
    dead_owner = str(procs.ProcRef.of(ghost.pid))
    ghost.wait()
    victim_ref = procs.ProcRef.of(victim.pid)
    forged = {"session": victim.pid, "owner": dead_owner}
    if forge == "worker":
        forged["worker"] = str(victim_ref)
    forger = subprocess.Popen(
        [sys.executable, "-c", FORGER, str(tmp_path / "a"), json.dumps(forged)], start_new_session=True
    )
    try:
        _until(tmp_path / "a" / "forged")
        (tmp_path / "b").mkdir()
        if forge == "session":  # the forger's own lease is broken: it said its owner was dead
            lease.acquire("test-gpu", tmp_path / "b", wait_s=20.0)
            assert forger.wait(timeout=5) == -signal.SIGKILL
            lease.release()
        else:  # the record is not the taker's: nobody is ended, the wait runs out
            with pytest.raises(lease.LeaseTimeout):
                lease.acquire("test-gpu", tmp_path / "b", wait_s=1.0)
            assert forger.poll() is None
        time.sleep(0.1)
        assert victim.poll() is None and victim_ref is not None and victim_ref.alive()
    finally:
        for proc in (forger, victim):
            proc.kill()
            proc.wait()


def test_a_taker_left_a_zombie_counts_as_gone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The killed taker is not reaped (its parent is busy, or it was orphaned where PID 1 reaps nothing):
    still dead, so its leftover child is ended even without a record."""
    monkeypatch.setenv(lease.DIR_ENV, str(tmp_path / "leases"))
    holder = subprocess.Popen([sys.executable, "-c", LEFTOVER, str(tmp_path / "a")], start_new_session=True)
    _until(tmp_path / "a" / "child")
    child = int((tmp_path / "a" / "child").read_text())
    (tmp_path / "leases" / "test-gpu.holder").unlink()
    holder.kill()  # not waited for: a zombie until this test reaps it
    deadline = time.monotonic() + 10
    while (info := procs.info_of(holder.pid)) is not None and info.alive and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        assert info is not None and info.state == "Z"
        lease.acquire("test-gpu", tmp_path / "b", wait_s=20.0)
        time.sleep(0.1)
        assert _ended(child)
        lease.release()
    finally:
        holder.wait()
        procs.kill(child)


def test_cpu_lane_numbers_are_held_per_process_until_it_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each process that claims a CPU lane gets the lowest number no live process holds; a dead holder's
    number is free again."""
    monkeypatch.setenv(lease.DIR_ENV, str(tmp_path))
    claim = "from kbench.sandbox.lease import claim_cpu_lane; import sys, time; print(claim_cpu_lane(), flush=True)"
    holder = subprocess.Popen(
        [sys.executable, "-c", claim + "; time.sleep(60)"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "0"
        assert lease.claim_cpu_lane() == 1  # 0 is the other process's
        second = subprocess.run([sys.executable, "-c", claim], capture_output=True, text=True, check=True)
        assert second.stdout.strip() == "2"  # 0 and 1 held
    finally:
        holder.kill()
        holder.wait()
    third = subprocess.run([sys.executable, "-c", claim], capture_output=True, text=True, check=True)
    assert third.stdout.strip() == "0"  # its holder died: free again
