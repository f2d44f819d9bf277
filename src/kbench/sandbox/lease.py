"""One GPU phase at a time per device, while worker processes start in parallel (worker side).

A worker spends its first seconds importing torch (and dynamo, Triton): work that needs no GPU. The local
executor therefore runs several evaluations per GPU at once, and every worker takes the device's lease,
an exclusive `flock` on a file named by the GPU's UUID, before any candidate code or GPU work runs. So
imports overlap, but only one process at a time builds candidate models, checks outputs or times on that
GPU, and the lease covers kbench runs that share a machine too.

A candidate's lease is never released by hand: the lock belongs to the open file, which the worker and
any child it forked hold until they die, and the host kills the worker's whole process group when the
job ends. Candidate code left running in a background thread or child therefore cannot overlap the next
job's timing. The worker writes LEASE_FILE into its job folder when it holds the lease, which is when
the host starts the job's wall-clock limit (waiting for another job's GPU phase is not the candidate's
time). The reference worker runs trusted code only: it builds the reference model on the CPU before
taking the lease and `release`s it once its GPU work is done, before writing its files and exiting.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
import time
from pathlib import Path

LEASE_FILE = "lease"
DIR_ENV = "KBENCH_LEASE_DIR"
_held: list[int] = []  # open lock descriptors: kept for the life of the process


def required(role: str, device: str) -> bool:
    """Whether a worker of this role on this device takes the lease (every GPU worker but a build)."""
    return device.startswith("cuda") and role != "build"


def lease_dir() -> Path:
    return Path(os.environ.get(DIR_ENV) or Path(tempfile.gettempdir(), "kbench-gpu-leases"))


def device_id(device: str) -> str:
    """A name for the physical GPU behind `device` (its UUID), stable across CUDA_VISIBLE_DEVICES."""
    import torch

    dev = torch.device(device)
    uuid = getattr(torch.cuda.get_device_properties(dev), "uuid", None)
    if uuid is not None:
        return f"gpu-{uuid}"
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")
    index = dev.index or 0
    return f"gpu-index-{visible[index] if index < len(visible) and visible[index] else index}"


def acquire(name: str, jobdir: Path) -> float:
    """Block until this process holds lease `name`; write the job folder's marker; return seconds waited."""
    folder = lease_dir()
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / f"{name}.lock", os.O_CREAT | os.O_RDWR, 0o666)
    os.set_inheritable(fd, True)  # children the candidate starts hold the lease until they die too
    t0 = time.perf_counter()
    fcntl.flock(fd, fcntl.LOCK_EX)
    _held.append(fd)
    (jobdir / LEASE_FILE).write_text(str(os.getpid()))
    return time.perf_counter() - t0


def release() -> None:
    """Give up every lease this process holds (trusted code only: the reference worker)."""
    while _held:
        fd = _held.pop()
        fcntl.flock(fd, fcntl.LOCK_UN)  # unlocks the open file, copies in forked children included
        os.close(fd)
