"""The device's timing lock: no runner starts CUDA beside a timing loop (referee side).

A runner's CUDA start (its context: ~0.1-0.3 s of driver work and device memory) disturbs nothing but a
timing loop, so it need not wait for the GPU lease (sandbox/lease.py): a referee lets its runner make
its context before the lease, while it holds the device's timing lock shared (`shared_window`, tried
once without waiting), when no timing loop runs on the device. Every timing loop holds the lock
exclusive (`timing_window`, referee/timing.py): while a loop runs, the context is made under the lease
instead; a context being made holds a loop back until it is made, never beside it. So the CUDA starts
come off the lease's time, in a batch and on a cold verdict's path.

Only referees (trusted) take the lock; a runner never opens it. A loop that cannot take it within
`TIMING_WAIT_S` (a process holding it for ever) runs all the same and says so. Its file is
`<lease folder>/<device>.timing`, no lease (`lease.leases` lists `*.lock` files only).
"""

from __future__ import annotations

import fcntl
import os
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
