"""`kbench doctor`: the kbench processes, GPU leases and build-cache entries on this machine, and ending the
stale ones.

A process is kbench's when it carries an owner (`procs.OWNER_ENV`: workers, warm starters, compilers and
a candidate's children inherit it); it is stale when that owner -- the kbench process that started it --
is gone. A lease is stale when nobody live holds it for a live owner (sandbox/lease.py). kbench ends
its own processes on every exit path; what this finds was left by a kbench of an earlier version, a
process killed in a way the kernel could not report, or a candidate that escaped its worker's session.

A build-cache entry (a finished build, a precompiled header, a shim folder) is bad when a file no longer
matches the digest its maker recorded, or it has none: kbench never loads one (it builds it again), so a
bad entry is evidence of a changed cache, not a risk. A staging folder whose builder is gone was left by
a killed build.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from kbench import entries
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


@dataclass(frozen=True)
class CacheEntry:
    path: Path
    kind: str  # build | precompiled header | shim | staging
    problem: str  # why it is bad: "changed or unsealed", "builder gone"


def _role(command: str, parent_command: str) -> str:
    if entries.STARTER in command:
        return "worker" if entries.STARTER in parent_command else "starter"
    if entries.REFEREE in command:
        return "runner" if entries.REFEREE in parent_command else "referee"
    if entries.BUILDER in command:
        return "builder"
    return "child of a worker"


def _alive(pid: int) -> bool:
    info = procs.info_of(pid)
    return info is not None and info.alive


def processes() -> list[Found]:
    """Every process on this machine that carries a kbench owner (this process excluded)."""
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


_STAGING_PID = re.compile(r"^\.?[0-9a-f]+[-.](\d+)[-.][0-9a-f]+$")


def _builder_gone(name: str) -> bool:
    """Whether a staging folder's maker (the pid in its name) is no longer running."""
    m = _STAGING_PID.match(name)
    return m is None or not _alive(int(m.group(1)))


def _claimed(folder: Path) -> bool:
    """Whether a precompiled header is being made in `folder` by a live process (its `.claim`)."""
    try:
        return _alive(int((folder / ".claim").read_text().strip() or "0"))
    except (OSError, ValueError):
        return False


def cache_entries(cache_dir: Path) -> tuple[int, list[CacheEntry]]:
    """The build cache under `cache_dir`: how many entries verify, and every one that does not."""
    from kbench.backends import pch
    from kbench.backends.buildcache import verified
    from kbench.referee.builds import FAILED, STAGING

    root = cache_dir / "builds"
    good, bad = 0, []

    def folders(where: Path) -> list[Path]:
        return sorted(p for p in where.iterdir() if p.is_dir()) if where.is_dir() else []

    for folder in folders(root):
        if folder.name in (STAGING, FAILED, ".pch", ".shim"):
            continue
        if verified(folder) is None:
            bad.append(CacheEntry(folder, "build", "changed or unsealed"))
        else:
            good += 1
    for folder in folders(root / ".pch"):
        if pch.sound(folder):
            good += 1
        elif not _claimed(folder):
            bad.append(CacheEntry(folder, "precompiled header", "changed or unsealed"))
    for folder in folders(root / FAILED):
        if verified(folder) is None:
            bad.append(CacheEntry(folder, "build error", "changed or unsealed"))
        else:
            good += 1
    for folder in folders(root / ".shim"):
        if folder.name.startswith("."):
            if _builder_gone(folder.name):
                bad.append(CacheEntry(folder, "staging", "builder gone"))
        elif verified(folder) is None:
            bad.append(CacheEntry(folder, "shim", "changed or unsealed"))
        else:
            good += 1
    for folder in folders(root / STAGING):
        if _builder_gone(folder.name):
            bad.append(CacheEntry(folder, "staging", "builder gone"))
    return good, bad


def remove(entries: list[CacheEntry]) -> None:
    """Remove bad cache entries (kbench would build each again anyway)."""
    for entry in entries:
        shutil.rmtree(entry.path, ignore_errors=True)


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
