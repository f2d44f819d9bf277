"""One GPU phase at a time per device, while worker processes start in parallel (worker side).

A worker spends its first seconds importing torch (and dynamo, Triton): work that needs no GPU. The local
executor therefore runs several evaluations per GPU at once, and every worker takes the device's lease,
an exclusive `flock` on a file named by the GPU's UUID, before any candidate code or GPU work runs. So
imports overlap, but only one process at a time builds candidate models, checks outputs or times on that
GPU, and the lease covers kbench runs that share a machine too.

The lease is taken by each job's referee (kbench/referee/), trusted code, never by its runner: a
candidate's code has no descriptor of the lock to give up, and the referee lets the lock go only once
the runner and everything it started are dead. The reference's referee builds its model on the CPU
before taking the lease and `release`s it once its GPU work is done, before writing its files.

A worker's CUDA start need not wait for the lease where no timing loop runs: sandbox/timinglock.py.

A lease can never stay with a dead owner. The holder writes who it is next to the lock (`Holder`: worker
pid, session, the kbench process that owns it, each with its start time). A waiter that finds the lock's
taker dead (its leftover children still hold the file) or the owning kbench process dead ends the stale
worker's session and every process that shares the locked file description, and takes the lease. A wait
has a limit (`lease_wait_s`): past it the worker fails with `LeaseTimeout`, one line naming the holder and
how to free it.
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from kbench.files import write_atomic
from kbench.sandbox import procs
from kbench.types import JobRole

DIR_ENV = "KBENCH_LEASE_DIR"  # RunConfig.lease_dir, passed on to workers by the host (evaluate/prebuild.py)
_held: list[int] = []  # open lock descriptors: kept for the life of the process
_lanes: list[int] = []  # the CPU lane locks this process holds (claim_cpu_lane), never released
_POLL_MAX_S = 0.02  # a waiter tries the lock at least this often (a lock attempt is one system call)


class LeaseTimeout(Exception):
    """The lease stayed with a live holder past the wait limit (kbench's failure, not the candidate's)."""


def required(role: JobRole, device: str) -> bool:
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


@dataclass(frozen=True)
class Holder:
    """Who holds a lease: the worker (pid, start time, session) and the kbench process that owns it."""

    worker: str  # procs.ProcRef as "PID:START"
    session: int
    owner: str  # "PID:START" of the owning kbench process; "" when unknown
    role: str
    job: str  # the job folder
    since: float  # time.time() when taken

    def describe(self) -> str:
        worker = procs.ProcRef.parse(self.worker)
        owner = procs.ProcRef.parse(self.owner)
        alive = "alive" if owner is not None and owner.alive() else "gone"
        held = time.strftime("%H:%M:%S", time.localtime(self.since))
        whose = f"kbench pid {owner.pid} ({alive})" if owner is not None else "no known kbench process"
        return f"pid {worker.pid if worker else '?'} ({self.role} worker of {whose}, job {self.job}) since {held}"


def _paths(name: str) -> tuple[Path, Path]:
    folder = lease_dir()
    return folder / f"{name}.lock", folder / f"{name}.holder"


def read_holder(name: str) -> Holder | None:
    return read_holder_at(_paths(name)[1])


def _write_holder(name: str, jobdir: Path, role: str) -> None:
    _, record = _paths(name)
    me = procs.self_ref()
    info = procs.info_of(me.pid)
    holder = Holder(
        worker=str(me),
        session=info.session if info else os.getpid(),
        owner=os.environ.get(procs.OWNER_ENV, ""),
        role=role,
        job=str(jobdir),
        since=time.time(),
    )
    write_atomic(record, json.dumps(asdict(holder)))


def locker(path: Path) -> int | None:
    """The pid that took the flock on `path` (/proc/locks), 0 when that process is gone (a pid namespace
    shows it so), None when no lock on it is listed or /proc/locks cannot be read."""
    try:
        st = path.stat()
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return None
    want = (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)
    for line in lines:
        entry = procs.flock_entry(line)
        if entry is not None and entry[1] == want:
            return entry[0]
    return None


def _gone(taker: int) -> bool:
    """Whether the process that took a lock is gone: 0 (a pid namespace hides a dead one so), no such
    process, or a zombie (dead, its parent has not reaped it: where PID 1 reaps nothing, for ever)."""
    info = procs.info_of(taker) if taker > 0 else None
    return info is None or not info.alive


def stale(name: str) -> Holder | None:
    """The lease's holder record when the lease is held for nobody: the process that took the lock is
    gone (children it left still hold the file) or the kbench process that owns it is gone; else None."""
    lock, _ = _paths(name)
    holder = read_holder(name)
    taker = locker(lock)
    worker = procs.ProcRef.parse(holder.worker) if holder else None
    owner = procs.ProcRef.parse(holder.owner) if holder else None
    if taker is not None and _gone(taker):
        # The taker is dead; whatever record there is, the lock is held by leftovers.
        return holder or Holder(worker="", session=0, owner="", role="?", job="?", since=0.0)
    if holder is None or worker is None:
        return None  # a new holder that has not written its record yet
    if taker is not None and taker != worker.pid:
        return None  # the record is an earlier holder's; the current one is writing its own
    if not worker.alive():
        # Without /proc/locks the record could be an earlier holder's while a new one writes its own:
        # only a record older than any such write counts.
        return holder if taker is not None or time.time() - holder.since > 2.0 else None
    return holder if owner is not None and not owner.alive() else None


def reclaim(name: str) -> Holder | None:
    """End every process holding a stale lease (and the stale worker's session); the Holder broken, or
    None when the lease is not stale. The lock is free once the killed processes are gone."""
    found = stale(name)
    if found is None:
        return None
    lock, record = _paths(name)
    worker = procs.ProcRef.parse(found.worker)
    holding = procs.lock_holders(lock)
    # The record is written by the holder, a candidate's worker among them: it is believed only as far as
    # the kernel bears it out. The session ended is the one the named worker leads (every worker leads its
    # own), and only while that worker is alive and took this very lock; a forged record names no other.
    if worker is not None and worker.alive() and found.session == worker.pid:
        if any(taker == worker.pid for _, taker in holding):
            procs.kill_session(found.session)
    # What still holds the lock are processes sharing the open file description the stale taker locked:
    # its fdinfo shows the lock. Every waiter has the file open too, but never that description, and a
    # process that took the lock since this pass began is a live taker of its own: neither is touched.
    # (Told apart by session instead, leftovers were missed wherever the taker did not lead its session,
    # and killing every process with the file open ended the other waiters.)
    for pid, taker in holding:
        if pid != os.getpid() and (_gone(taker) or (worker is not None and taker == worker.pid)):
            procs.kill(pid)
    # The record goes once the lock is free: a waiter's next pass still needs it while the killed die.
    try:
        if not _busy(lock) and read_holder(name) == found:
            record.unlink()
    except OSError:
        pass
    return found


def acquire(name: str, jobdir: Path, wait_s: float = 600.0, role: str = "candidate") -> float:
    """Wait until this process holds lease `name`, reclaiming it from a dead owner; return seconds waited.

    Raises LeaseTimeout after `wait_s` with a live holder."""
    lock, _ = _paths(name)
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_CREAT | os.O_RDWR, 0o666)
    os.set_inheritable(fd, True)  # children the candidate starts hold the lease until they die too
    t0 = time.perf_counter()
    delay = 0.001
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            pass
        if reclaim(name) is not None and not _busy(lock):
            delay = 0.001
            continue  # the stale holders are gone: take it now
        # Otherwise wait: a holder that could not be ended (a confined candidate worker may not signal
        # another worker's leftovers, sandbox/confine.py) is ended by the next reference worker (trusted,
        # unconfined) or `kbench doctor --kill`; past `wait_s` the LeaseTimeout names it.
        waited = time.perf_counter() - t0
        if waited > wait_s:
            os.close(fd)
            holder = read_holder(name)
            who = holder.describe() if holder else "a process that left no record"
            raise LeaseTimeout(
                f"GPU lease {name} still held after {waited:.0f} s by {who}; wait for that kbench process "
                f"to finish, stop it, or run `kbench doctor --kill` if it is stale (lease_wait_s sets the limit)"
            )
        time.sleep(delay)
        delay = min(delay * 2, _POLL_MAX_S)
    _held.append(fd)
    _write_holder(name, jobdir, role)
    return time.perf_counter() - t0


def release() -> None:
    """Give up every lease this process holds (trusted code only: the reference worker). The holder
    record goes first: removed after the unlock, it could be the next holder's."""
    me = str(procs.self_ref())
    for path in lease_dir().glob("*.holder"):
        holder = read_holder(path.name.removesuffix(".holder"))
        if holder is not None and holder.worker == me:
            path.unlink(missing_ok=True)
    while _held:
        fd = _held.pop()
        fcntl.flock(fd, fcntl.LOCK_UN)  # unlocks the open file, copies in forked children included
        os.close(fd)


def claim_cpu_lane() -> int:
    """The lowest CPU lane number of this machine that no live process holds, held by this process from
    now to its end (an exclusive `flock` in the lease folder's `cpu-lanes`): a Ray CPU lane actor's, whose
    lane number names its workers' cores (isolate.share_cores), so that lanes placed on one node by a
    cluster never pin their workers to the same cores."""
    folder = lease_dir() / "cpu-lanes"
    folder.mkdir(parents=True, exist_ok=True)
    number = 0
    while True:
        fd = os.open(folder / f"{number}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            number += 1
            continue
        _lanes.append(fd)
        return number


def leases() -> list[tuple[str, Holder | None, bool, bool]]:
    """Every lease in the lease folder: (name, holder record, held now, stale)."""
    out = []
    for lock in sorted(lease_dir().glob("*.lock")):
        name = lock.name.removesuffix(".lock")
        held = _busy(lock)
        out.append((name, read_holder(name), held, held and stale(name) is not None))
    return out


def _busy(lock: Path) -> bool:
    try:
        fd = os.open(lock, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def read_holder_at(record: Path) -> Holder | None:
    try:
        return Holder(**json.loads(record.read_text()))
    except (OSError, ValueError, TypeError):
        return None
