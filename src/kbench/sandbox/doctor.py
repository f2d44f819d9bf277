"""`kbench doctor`: the kbench processes and GPU leases on this machine, and ending the stale ones.

A process is kbench's when it carries an owner (`procs.OWNER_ENV`: workers, warm starters, compilers and
a candidate's children inherit it); it is stale when that owner -- the kbench process that started it --
is gone. A lease is stale when nobody live holds it for a live owner (sandbox/lease.py). kbench ends
its own processes on every exit path; what this finds was left by a kbench of an earlier version, a
process killed in a way the kernel could not report, or a candidate that escaped its worker's session.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from kbench.sandbox import lease, procs


@dataclass(frozen=True)
class Found:
    pid: int
    role: str  # starter | worker | reference worker | child of a worker
    owner: procs.ProcRef | None
    session: int
    age_s: float
    command: str

    @property
    def stale(self) -> bool:
        return self.owner is not None and not self.owner.alive()


@dataclass(frozen=True)
class LeaseState:
    name: str
    holder: lease.Holder | None  # the record its holder wrote (a candidate's worker can rewrite it)
    held: bool
    stale: bool
    pids: tuple[int, ...] = ()  # what the kernel shows holding the lock (sharing the locked file description)

    @property
    def state(self) -> str:
        return "stale" if self.stale else "held" if self.held else "free"


def _role(command: str, parent_command: str) -> str:
    if "kbench.sandbox.zygote" in command:
        return "worker" if "kbench.sandbox.zygote" in parent_command else "starter"
    if "kbench.worker.reference" in command:
        return "reference worker"
    if "kbench.worker.candidate" in command:
        return "worker"
    return "child of a worker"


def _alive(pid: int) -> bool:
    info = procs.info_of(pid)
    return info is not None and info.alive


def processes() -> list[Found]:
    """Every process on this machine that carries a kbench owner (this process excluded)."""
    import os

    found = []
    for pid in procs.all_pids():
        if pid == os.getpid():
            continue
        owner = procs.owner_of(pid)
        info = procs.info_of(pid)
        if owner is None or info is None or not info.alive:
            continue
        command = procs.command(pid)
        role = _role(command, procs.command(info.ppid))
        found.append(Found(pid, role, owner, info.session, procs.age(pid), command))
    return found


def leases() -> list[LeaseState]:
    found = []
    for name, holder, held, stale in lease.leases():
        pids = tuple(pid for pid, _ in procs.lock_holders(lease.lease_dir() / f"{name}.lock")) if held else ()
        found.append(LeaseState(name, holder, held, stale, pids))
    return found


def end_stale() -> tuple[list[Found], list[LeaseState]]:
    """End every stale process (its whole session) and reclaim every stale lease; what was ended."""
    ended = [p for p in processes() if p.stale]
    for p in ended:
        if p.session == p.pid:
            procs.kill_session(p.session)  # a worker: its compilers and the candidate's children too
        else:
            procs.kill(p.pid)
    broken = []
    for state in leases():
        if state.stale and lease.reclaim(state.name) is not None:
            broken.append(state)
    # SIGKILL is delivered, not done: wait (briefly) for the ended processes to vanish and for the locks
    # of the reclaimed leases, which their killed holders keep until they exit, to come free.
    names = {s.name for s in broken}
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline and (
        any(_alive(p.pid) for p in ended) or any(held for name, _, held, _ in lease.leases() if name in names)
    ):
        time.sleep(0.02)
    return ended, broken
