"""Processes on this machine, read from /proc: who is alive, which session they belong to, who owns them.

Every process an evaluation starts carries its owner in the environment (`OWNER_ENV`: the pid and start
time of the kbench process that started it), leads its own session (workers) or runs in a worker's
session (compilers, a candidate's children), and dies with its parent (`die_with_parent`). A process is
named by pid *and* start time (`ProcRef`), so a pid reused by an unrelated process is never mistaken
for a dead worker's.

What this cannot see: processes of other users, and a candidate's child that left the worker's session
(`setsid`) and cleared its environment; `kbench doctor` lists what it can attribute.
"""

from __future__ import annotations

import ctypes
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

OWNER_ENV = "KBENCH_OWNER"  # "PID:START" of the kbench process that owns a worker (and its children)
PARENT_ENV = "KBENCH_PARENT"  # a spawned worker's parent pid, for `bind_to_parent`
KEY_FIFO_ENV = "KBENCH_KEY_FIFO"  # set for workers forked by the warm starter (sandbox/starter.py)
_PR_SET_PDEATHSIG = 1
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # a kbench process stops on each, saying so


@dataclass(frozen=True)
class ProcInfo:
    pid: int
    state: str
    ppid: int
    pgrp: int
    session: int
    start: int  # clock ticks after boot (/proc/PID/stat field 22): with the pid, a process's identity
    flags: int = 0  # the kernel's per-process flags (/proc/PID/stat field 9)

    @property
    def alive(self) -> bool:
        return self.state not in ("Z", "X")


@dataclass(frozen=True)
class ProcRef:
    """A process by pid and start time."""

    pid: int
    start: int

    def __str__(self) -> str:
        return f"{self.pid}:{self.start}"

    @classmethod
    def parse(cls, text: str) -> ProcRef | None:
        pid, _, start = text.partition(":")
        return cls(int(pid), int(start)) if pid.isdigit() and start.isdigit() else None

    @classmethod
    def of(cls, pid: int) -> ProcRef | None:
        info = info_of(pid)
        return None if info is None else cls(pid, info.start)

    def alive(self) -> bool:
        info = info_of(self.pid)
        return info is not None and info.alive and info.start == self.start


def info_of(pid: int) -> ProcInfo | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (OSError, ValueError):
        return None
    fields = stat[stat.rfind(")") + 2 :].split()  # after "pid (comm) ": state ppid pgrp session ...
    try:
        return ProcInfo(
            pid, fields[0], int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19]), int(fields[6])
        )
    except (IndexError, ValueError):
        return None


_PF_EXITING = 0x4  # /proc/PID/stat `flags`: the process has begun to exit (its files close next)


def exiting(pid: int) -> bool:
    """Whether process `pid` is gone, a zombie, or on its way out (the kernel closes its files, and so
    releases its locks, before its parent can reap it)."""
    info = info_of(pid)
    return info is None or not info.alive or bool(info.flags & _PF_EXITING)


def age(pid: int | None = None) -> float:
    """Seconds since process `pid` (this one) started; 0.0 where /proc cannot tell."""
    info = info_of(os.getpid() if pid is None else pid)
    try:
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return max(0.0, uptime - info.start / os.sysconf("SC_CLK_TCK")) if info else 0.0
    except (OSError, ValueError, IndexError):
        return 0.0


BLAS_THREADS_ENV = "OPENBLAS_NUM_THREADS"


def worker_env(extra: dict[str, str] | None = None, bytecode_writes: bool = False) -> dict[str, str]:
    """The environment of a worker: of this process's, only what running Python, torch, CUDA and the
    compilers needs (sandbox/isolate.py `scrubbed_env`: no API key, token or credential reaches a worker
    or the warm starter, whose memory every forked worker shares), the job's additions, and this process
    as its owner (`OWNER_ENV`, inherited by everything the worker starts, read by `kbench doctor`). It
    reads kbench's bytecode folder where there is one, and writes bytecode nowhere unless
    `bytecode_writes` (a trusted process that imports no candidate: kbench/sandbox/bytecode.py).

    numpy's BLAS gets one thread unless the host says otherwise: its pool is sized when numpy is imported
    (in the warm starter, before any job's thread count is known), and a pool of every core's threads on
    a worker's share of them slowed the Triton interpreter's matrix products (numpy) past the job's
    time limit on a two-core machine. torch's own threads are the job's (`JobSpec.threads`)."""
    from kbench.sandbox import bytecode
    from kbench.sandbox.isolate import scrubbed_env

    env = {BLAS_THREADS_ENV: "1"} | scrubbed_env(os.environ, extra)
    env.update(bytecode.env(writes=bytecode_writes))
    env[OWNER_ENV] = str(self_ref())
    return env


def all_pids() -> list[int]:
    try:
        return [int(e.name) for e in Path("/proc").iterdir() if e.name.isdigit()]
    except OSError:
        return []


def self_ref() -> ProcRef:
    """This process (start time 0 where /proc is missing)."""
    return ProcRef.of(os.getpid()) or ProcRef(os.getpid(), 0)


def members(session: int) -> list[int]:
    """Live (non-zombie) processes of session `session` or of process group `session` (a worker leads
    both; a candidate's child may have moved to a group of its own inside the session).

    Zombies are skipped: in containers whose PID 1 does not reap orphans, a killed child stays a zombie
    forever, and `killpg(pgid, 0)` would keep reporting it. Session 0 (processes of a launcher that never
    called setsid, kernel threads) is nobody's worker: it has no members here.
    """
    if session <= 0:
        return []
    found = []
    for pid in all_pids():
        info = info_of(pid)
        if info is not None and info.alive and session in (info.session, info.pgrp):
            found.append(pid)
    return found


def kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def kill_session(session: int) -> None:
    """SIGKILL the whole group `session` at once, then any member of the session outside it. Session 0 is
    refused: `killpg(0)` would be this process's own group."""
    if session <= 0:
        return
    try:
        os.killpg(session, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for pid in members(session):
        kill(pid)


def end_session(session: int, wait_s: float = 2.0) -> bool:
    """Kill what is left of a worker's session; True if anything was left. Waits up to `wait_s` for it to
    vanish."""
    if not members(session):
        return False
    kill_session(session)
    deadline = time.monotonic() + wait_s
    while members(session) and time.monotonic() < deadline:
        time.sleep(0.02)
    return True


def owner_of(pid: int) -> ProcRef | None:
    """The kbench process that owns `pid` (its `OWNER_ENV`), None when it carries none or is unreadable."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return None
    prefix = OWNER_ENV.encode() + b"="
    for item in environ.split(b"\0"):
        if item.startswith(prefix):
            return ProcRef.parse(item[len(prefix) :].decode(errors="replace"))
    return None


def command(pid: int) -> str:
    """The process's command line, spaces between its arguments ("" when unreadable)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()


def belonging_to(owner: ProcRef, session: int | None = None) -> list[int]:
    """Live processes that belong to kbench process `owner`: they carry it as their owner (workers, their
    compilers and children, warm starters), or run in `session` (the owner's own, when it leads one)."""
    found = []
    for pid in all_pids():
        info = info_of(pid)
        if info is None or not info.alive or pid == owner.pid:
            continue
        if (session is not None and session > 0 and info.session == session) or owner_of(pid) == owner:
            found.append(pid)
    return found


def running(owner: ProcRef, session: int | None, cmdline: str) -> list[int]:
    """The processes of `owner` (as `belonging_to` finds them) whose command line is `cmdline`."""
    return [pid for pid in belonging_to(owner, session) if command(pid) == cmdline]


def lock_holders(path: Path) -> list[tuple[int, int]]:
    """Processes whose open file description holds a `flock` on `path`, each with the pid of the process
    that took the lock (as its fdinfo "lock:" line shows it: 0 when that process is gone and a pid
    namespace hides it). A process that merely has the file open (a waiter trying the lock) is not one.
    """
    try:
        st = path.stat()
    except OSError:
        return []
    found = []
    for pid in all_pids():
        try:
            entries = list(Path(f"/proc/{pid}/fd").iterdir())
        except OSError:
            continue
        for entry in entries:
            try:
                target = entry.stat()
                if (target.st_dev, target.st_ino) != (st.st_dev, st.st_ino):
                    continue
                info = Path(f"/proc/{pid}/fdinfo/{entry.name}").read_text()
            except OSError:
                continue
            taker = _flock_taker(info)
            if taker is not None:
                found.append((pid, taker))
                break
    return found


def _flock_taker(fdinfo: str) -> int | None:
    """The taker's pid from the "lock:" line of an fdinfo file, None when the descriptor holds no flock."""
    for line in fdinfo.splitlines():
        entry = flock_entry(line[len("lock:") :]) if line.startswith("lock:") else None
        if entry is not None:
            return entry[0]
    return None


def flock_entry(line: str) -> tuple[int, tuple[int, int, int]] | None:
    """(taker pid, (major, minor, inode) of the file) from a lock line as /proc/locks and fdinfo write it,
    "1: FLOCK  ADVISORY  WRITE PID MAJ:MIN:INODE 0 EOF"; the pid is 0 when a pid namespace hides a taker
    that is gone. None for any other line: another kind of lock, or a waiter's ("1: -> FLOCK ...")."""
    parts = line.split()
    if len(parts) < 6 or parts[1] != "FLOCK" or parts[0].endswith("->"):
        return None
    try:
        major, minor, inode = parts[5].split(":")
        return max(int(parts[4]), 0), (int(major, 16), int(minor, 16), int(inode))
    except ValueError:
        return None


def die_with_parent(parent: int) -> None:
    """Ask the kernel to SIGKILL this process when its parent dies (Linux), then check that the parent is
    still `parent`: if it died before the request, nothing would ever send the signal.

    Not inherited by children this process forks, and tied to the parent *thread* that started this
    process: the host starts workers from the thread that waits for them, so that thread outlives them.
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: the host's session kill on every exit path still applies
    if os.getppid() != parent:
        os._exit(70)  # EX_SOFTWARE-like: the owner is gone, do nothing for nobody


def bind_to_parent() -> None:
    """`die_with_parent` for a worker the host spawned (it named itself in PARENT_ENV); a worker forked by
    the warm starter was bound to the starter before it ran (sandbox/zygote.py)."""
    parent = os.environ.pop(PARENT_ENV, "")
    if parent.isdigit():
        die_with_parent(int(parent))
