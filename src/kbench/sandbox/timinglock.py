"""The device's timing lock: no worker starts CUDA beside a timing loop (worker side).

A worker's CUDA start (its context: ~0.1-0.3 s of driver work and device memory) is trusted code and
disturbs nothing but a timing loop, so it need not wait for the GPU lease (sandbox/lease.py): a worker
makes its context before taking the lease (`early_cuda`; the candidate's on a thread beside its other
start-up work, `EarlyCuda`) when no timing loop runs on the device. Every timing loop holds the device's
timing lock (`timing_window`, exclusive; worker/timing.py) and an early context the same lock shared,
tried once without waiting: while a loop runs, the context is made under the lease as before; a context
being made holds a loop back until it is made, never beside it. So the CUDA starts come off the lease's
time, in a batch and on a cold verdict's path (the candidate's is made beside the reference's work, not
after it).

The timing lock is only a courtesy among trusted callers: a loop that cannot take it within
`TIMING_WAIT_S` (a process holding it for ever) runs all the same and says so; candidate code, which runs
only under the lease, cannot overlap another job's loop whatever it does with that lock. Its file is
`<lease folder>/<device>.timing`, no lease (`lease.leases` lists `*.lock` files only).
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from kbench.sandbox import lease

POLL_MAX_S = 0.02  # a waiting loop tries the lock at least this often
TIMING_WAIT_S = 1.0  # a timing loop waits at most this long for early CUDA starts to end (they take ~0.2 s)


def _timing_lock(name: str) -> int:
    folder = lease.lease_dir()
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / f"{name}.timing", os.O_CREAT | os.O_RDWR, 0o666)
    os.set_inheritable(fd, False)
    return fd


@contextmanager
def timing_window(name: str, wait_s: float = TIMING_WAIT_S) -> Iterator[bool]:
    """Hold the timing lock of device `name` (exclusive) around a timing loop; yields whether it was
    taken (False: past `wait_s` another process still held it, and the loop runs all the same)."""
    fd = _timing_lock(name)
    deadline = time.monotonic() + wait_s
    delay = 0.001
    taken = False
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                taken = True
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    break
            time.sleep(delay)
            delay = min(delay * 2, POLL_MAX_S)
        yield taken
    finally:
        os.close(fd)  # the lock goes with the descriptor


def early_cuda(device: str) -> bool:
    """Make this process's CUDA context on `device` now (a worker's trusted start, before its lease),
    unless a timing loop runs on that device; True when it was made. Holds the device's timing lock shared
    meanwhile, so no loop begins beside it; where a loop runs, nothing is done (the worker's CUDA then
    starts under its lease, as before)."""
    import torch

    try:
        fd = _timing_lock(lease.device_id(device))
    except Exception:  # no such device, or no lease folder: the job meets it where it did before
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        try:
            torch.zeros(1, device=device)  # the context, and the allocator's first block
            torch.cuda.synchronize(device)
        except Exception:  # the same call fails again under the lease, where the job reports it as before
            return False
        return True
    finally:
        os.close(fd)


@contextmanager
def shared_window(device: str) -> Iterator[bool]:
    """The device's timing lock held shared, tried once without waiting, for another process's CUDA start
    (a referee holds it while its runner makes its context); yields whether it was taken. Held, no timing
    loop begins on the device until it is let go; not taken, a loop runs now and the start waits for the
    lease."""
    try:
        fd = _timing_lock(lease.device_id(device))
    except Exception:  # no such device, or no lease folder: the job meets it where it did before
        yield False
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


class EarlyCuda:
    """`early_cuda` on a thread of its own, beside the worker's CPU work of its start (imports, hooks, a
    model built on the CPU): torch leaves the GIL while the driver makes the context. `join()` before the
    lease: the seconds it took where it made the context, else None."""

    def __init__(self, device: str) -> None:
        self.made, self.seconds = False, 0.0
        self._thread = threading.Thread(
            target=self._run, args=(device,), name="kbench-cuda-start", daemon=True
        )
        self._thread.start()

    def _run(self, device: str) -> None:
        t0 = time.perf_counter()
        self.made = early_cuda(device)
        self.seconds = time.perf_counter() - t0

    def join(self) -> float | None:
        self._thread.join()
        return round(self.seconds, 3) if self.made else None
