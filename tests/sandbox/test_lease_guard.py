"""The host's watch over a candidate worker's GPU lease (sandbox/lease.py `Guard`), with fake workers that
take a lease the way a candidate worker does (lease.acquire, then phase `load`) and then let it go, or not."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_sandbox_host import SPEC, _module

from kbench.sandbox import lease, procs
from kbench.sandbox.host import WorkerExit, run_worker

BUDGETS = {"lease": 30.0, "load": 30.0, "correctness": 30.0}

WORKER = """
import fcntl, os, sys, time
from pathlib import Path
from kbench.sandbox import lease
from kbench.sandbox.protocol import announce
jobdir = Path(sys.argv[1])
announce(jobdir, "lease")
lease.acquire("gpu-test", jobdir, 10, "candidate")
announce(jobdir, "load")
{after}
"""


def _run(tmp_path: Path, after: str, guard: bool = True) -> tuple[WorkerExit, float]:
    env = _module(tmp_path, WORKER.format(after=after)) | {lease.DIR_ENV: str(tmp_path / "leases")}
    t0 = time.monotonic()
    exit_ = run_worker("fakeworker", tmp_path / "job", SPEC, BUDGETS, env=env, guard_lease=guard)
    return exit_, time.monotonic() - t0


def _free(lock: Path) -> bool:
    return not lease._busy(lock)


@pytest.mark.skipif(not lease.locks_visible(), reason="/proc/locks does not show this process's locks")
def test_a_worker_that_lets_its_lease_go_is_ended_and_named(tmp_path: Path) -> None:
    after = "for fd in lease._held: fcntl.flock(fd, fcntl.LOCK_UN)\ntime.sleep(60)\n"
    exit_, seconds = _run(tmp_path, after)
    assert "gave up the GPU lease" in exit_.lease_lost and "held by no process" in exit_.lease_lost
    assert seconds < 20 and not exit_.timed_out
    assert not procs.members(exit_.pgid)
    assert _free(tmp_path / "leases" / "gpu-test.lock")  # the host gave back what it took


@pytest.mark.skipif(not lease.locks_visible(), reason="/proc/locks does not show this process's locks")
def test_a_worker_that_removes_its_record_and_lets_go_is_caught(tmp_path: Path) -> None:
    after = (
        "Path(os.environ['KBENCH_LEASE_DIR'], 'gpu-test.holder').unlink()\n"
        "for fd in lease._held: os.close(fd)\n"
        "time.sleep(60)\n"
    )
    exit_, _ = _run(tmp_path, after)
    assert "gave up the GPU lease" in exit_.lease_lost


@pytest.mark.skipif(not lease.locks_visible(), reason="/proc/locks does not show this process's locks")
def test_another_job_that_takes_the_released_lease_is_seen(tmp_path: Path) -> None:
    """A waiter of another kbench process gets the lock the moment the worker lets go: the host finds the
    lock with a pid that is not its worker's."""
    folder = tmp_path / "leases"
    folder.mkdir()
    got = tmp_path / "got"
    waiter = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys, time\n"
            "fd = os.open(sys.argv[1], os.O_CREAT | os.O_RDWR)\n"
            "while not os.path.exists(sys.argv[1][:-5] + '.holder'): time.sleep(0.01)\n"  # the worker's first
            "fcntl.flock(fd, fcntl.LOCK_EX)\n"
            "open(sys.argv[2], 'w').write('got')\n"
            "time.sleep(30)\n",
            str(folder / "gpu-test.lock"),
            str(got),
        ]  # fmt: skip
    )
    try:
        after = (
            "time.sleep(0.5)\n"  # the waiter is blocked on the lock by now
            "for fd in lease._held: fcntl.flock(fd, fcntl.LOCK_UN)\n"
            f"while not os.path.exists({str(got)!r}): time.sleep(0.01)\n"
            "time.sleep(60)\n"
        )
        exit_, seconds = _run(tmp_path, after)
        assert f"held by pid {waiter.pid}" in exit_.lease_lost, exit_.lease_lost
        assert seconds < 20
    finally:
        waiter.kill()
        waiter.wait()


@pytest.mark.skipif(not lease.locks_visible(), reason="/proc/locks does not show this process's locks")
def test_honest_workers_that_keep_their_lease_until_they_exit_pass(tmp_path: Path) -> None:
    """The lease goes with the worker's files as it exits, before its parent can reap it: never a cheat."""
    for i in range(6):
        folder = tmp_path / str(i)
        folder.mkdir()
        after = f"time.sleep({0.05 * i})\n" + (
            "os._exit(0)\n" if i % 2 else ""
        )  # os._exit: as real workers end
        exit_, _ = _run(folder, after)
        assert exit_.lease_lost == "" and exit_.returncode == 0, (i, exit_)


@pytest.mark.skipif(not lease.locks_visible(), reason="/proc/locks does not show this process's locks")
def test_without_the_guard_nothing_is_watched(tmp_path: Path) -> None:
    after = "for fd in lease._held: fcntl.flock(fd, fcntl.LOCK_UN)\ntime.sleep(0.5)\n"
    exit_, _ = _run(tmp_path, after, guard=False)
    assert exit_.lease_lost == "" and exit_.returncode == 0


def test_locks_are_visible_where_proc_locks_lists_them() -> None:
    """The self-check the guard relies on: this process's flock shows with its pid (Linux with /proc)."""
    if not os.path.exists("/proc/locks"):
        pytest.skip("no /proc/locks")
    assert lease.locks_visible()


@pytest.mark.skipif(not lease.locks_visible(), reason="/proc/locks does not show this process's locks")
def test_the_guard_holds_the_lock_it_found_free_until_closed(tmp_path: Path) -> None:
    """Found free under a live worker, the lock is taken by the host at once, so no waiter gets it, and
    given back by `close()`."""
    folder, jobdir, go = tmp_path / "leases", tmp_path / "job", tmp_path / "go"
    jobdir.mkdir()
    worker = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys, time\nfrom pathlib import Path\n"
            "from kbench.sandbox import lease\n"
            "lease.acquire('gpu-test', Path(sys.argv[1]), 10, 'candidate')\n"
            "while not os.path.exists(sys.argv[2]): time.sleep(0.01)\n"
            "for fd in lease._held: fcntl.flock(fd, fcntl.LOCK_UN)\n"
            "open(sys.argv[2] + '.done', 'w').close()\n"
            "time.sleep(30)\n",
            str(jobdir),
            str(go),
        ],  # fmt: skip
        env=os.environ | {lease.DIR_ENV: str(folder)},
    )
    try:
        guard = lease.Guard(jobdir, folder, worker.pid)
        deadline = time.monotonic() + 60
        while not (folder / "gpu-test.holder").exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not guard.check("receive")  # not yet under the lease: nothing is asked
        assert not guard.check("load") and guard.lock == folder / "gpu-test.lock"
        go.touch()
        while not Path(str(go) + ".done").exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert guard.check("correctness") and "held by no process" in guard.violation
        assert lease.locker(folder / "gpu-test.lock") == os.getpid()
        guard.close()
        assert lease.locker(folder / "gpu-test.lock") is None
    finally:
        worker.kill()
        worker.wait()
