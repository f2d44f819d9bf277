"""Host side of the sandbox: spawn a worker process, limit it, time it out, kill its whole group.

What this does: each worker is `python -m MODULE JOBDIR` (or the same module in a child forked by the
warm starter, sandbox/starter.py, which skips importing torch per job) in a new session (its own process
group), with a temporary working folder, core dumps off, an address-space limit (RLIMIT_AS) on CPU jobs
and a data limit (RLIMIT_DATA) on CUDA jobs, and a hard wall-clock limit after which the host sends
SIGKILL to the whole group. After the worker ends, any process still in its group is killed and reported.

What this does not stop: the worker runs as the same user with the same filesystem and network access,
so a hostile candidate can read or write the user's files (including the build cache), or escape the
group with `setsid()` and keep running; the GPU is shared with nothing else but not isolated either. Run
untrusted candidates inside a container or VM when that matters.

RLIMIT_AS is not used for CUDA jobs because the CUDA driver reserves far more virtual address space than
it commits (tens of GB for an H200's unified address range) and would fail to initialise under a limit
that bounds real use; RLIMIT_DATA counts only writable private mappings, so it bounds host memory.
"""

from __future__ import annotations

import os
import re
import resource
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from kbench.sandbox import lease
from kbench.sandbox.protocol import JOB_FILE, KEY_BYTES, KEY_FIFO_ENV, LOG_FILE, JobSpec
from kbench.sandbox.starter import ForkedProcess

LOG_TAIL_LINES = 60
KEY_FIFO = "key.fifo"
KEY_DELIVERY_S = 600.0  # a forked worker opens its key FIFO first thing; a loaded host may be slow
LEASE_WAIT_S = 3600.0  # a GPU job's imports plus its wait for other jobs' GPU phases (each bounded)


@dataclass(frozen=True)
class WorkerExit:
    returncode: int | None  # None when the host killed it at the time limit
    timed_out: bool
    seconds: float
    leftover: bool  # processes of the worker's group were still running after it ended
    log_tail: str
    key: bytes
    pgid: int = 0


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def _limit(pid: int, memory_gb: float, cuda: bool) -> None:
    resource.prlimit(pid, resource.RLIMIT_CORE, (0, 0))
    if memory_gb > 0:
        limit = int(memory_gb * 2**30)
        resource.prlimit(pid, resource.RLIMIT_DATA if cuda else resource.RLIMIT_AS, (limit, limit))


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of group `pgid`, read from /proc.

    Zombies are skipped: in containers whose PID 1 does not reap orphans, a killed child stays a zombie
    in the group forever, and `killpg(pgid, 0)` would keep reporting it.
    """
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()  # after "pid (comm) ": state ppid pgrp ...
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            members.append(int(entry.name))
    return members


def group_alive(pgid: int) -> bool:
    if Path("/proc/self/stat").exists():
        return bool(group_members(pgid))
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _reap_group(pgid: int) -> bool:
    """Kill what is left of the group; True if anything was left. Waits up to 2 s for it to vanish."""
    if not group_alive(pgid):
        return False
    kill_group(pgid)
    deadline = time.monotonic() + 2.0
    while group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.02)
    return True


def worker_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.update(extra or {})
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _wait(
    proc: subprocess.Popen[bytes] | ForkedProcess, jobdir: Path, timeout_s: float, t0: float, leased: bool
) -> bool:
    """Wait for the worker; False when it ran past its limit.

    A GPU job's limit runs from when it holds the device lease (sandbox/lease.py): before that only
    kbench's own code runs (imports, then waiting for other jobs' GPU phases), bounded by LEASE_WAIT_S.
    """
    marker = jobdir / lease.LEASE_FILE
    watching = leased
    deadline = t0 + (LEASE_WAIT_S if leased else timeout_s)
    while True:
        if watching and marker.exists():
            watching, deadline = False, time.monotonic() + timeout_s
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        try:
            proc.wait(timeout=min(remaining, 0.05) if watching else remaining)
            return True
        except subprocess.TimeoutExpired:
            continue


def one_gpu(spec: JobSpec, env: dict[str, str] | None) -> tuple[JobSpec, dict[str, str]]:
    """Show a GPU worker only its own GPU: CUDA_VISIBLE_DEVICES names the one physical device and the
    worker uses `cuda:0`. A worker that saw every GPU would launch a candidate's `<<<...>>>` kernels on
    the current device (0) with tensors on `cuda:N` (illegal memory access), and could touch other jobs'
    GPUs. Build jobs (no GPU) and CPU jobs are left as they are.
    """
    env = dict(env or {})
    found = re.fullmatch(r"cuda(?::(\d+))?", spec.device)
    if found is None or spec.role == "build":
        return spec, env
    index = int(found.group(1) or 0)
    visible = env.get("CUDA_VISIBLE_DEVICES", os.environ.get("CUDA_VISIBLE_DEVICES"))
    ids = [x.strip() for x in visible.split(",") if x.strip()] if visible is not None else None
    if ids is not None and index >= len(ids):
        return spec, env  # not a visible device: the worker reports torch's own error
    env["CUDA_VISIBLE_DEVICES"] = ids[index] if ids is not None else str(index)
    return spec.model_copy(update={"device": "cuda:0"}), env


def run_worker(
    module: str,
    jobdir: Path,
    spec: JobSpec,
    timeout_s: float,
    env: dict[str, str] | None = None,
    start: str = "auto",
) -> WorkerExit:
    """Run `python -m module jobdir` for `spec` under the limits; always returns, never raises for the job.

    `start`: `fork` takes the worker from the warm starter (sandbox/starter.py: no torch import per job),
    `spawn` starts a new interpreter, `auto` forks when a starter runs here and spawns otherwise.
    """
    jobdir.mkdir(parents=True, exist_ok=True)
    spec, env = one_gpu(spec, env)
    (jobdir / JOB_FILE).write_text(spec.model_dump_json())
    key = secrets.token_bytes(KEY_BYTES)
    with tempfile.TemporaryDirectory(prefix="kbench-cwd-") as cwd:
        proc: subprocess.Popen[bytes] | ForkedProcess | None = None
        if start != "spawn":
            proc = _fork(module, jobdir, cwd, env, spec, key)
            if proc is None and start == "fork":
                from kbench.errors import ConfigError
                from kbench.sandbox.starter import failure_reason

                why = failure_reason(worker_env(env)) or "the starter did not fork"
                raise ConfigError(f"worker_start=fork: no warm starter here ({why}); use auto or spawn")
        if proc is None:
            proc = _spawn(module, jobdir, cwd, env, spec, key)
        # The limit runs from the worker's start: a starter that was still coming up (importing torch,
        # seconds on a busy machine) is kbench's time, and a deadline already past when the fork returned
        # killed the child before it led its own group.
        t0 = time.monotonic()
        pgid = proc.pid  # a new session makes the worker its group's leader
        timed_out = not _wait(proc, jobdir, timeout_s, t0, lease.required(spec.role, spec.device))
        if timed_out:
            kill_group(pgid)
            if proc.poll() is None:
                _kill(proc.pid)  # not yet its group's leader (setsid is its first step): the process itself
            proc.wait()
        seconds = time.monotonic() - t0
        leftover = _reap_group(pgid)
    return WorkerExit(
        returncode=None if timed_out else proc.returncode,
        timed_out=timed_out,
        seconds=seconds,
        leftover=leftover and not timed_out,
        log_tail=log_tail(jobdir / LOG_FILE),
        key=key,
        pgid=pgid,
    )


def _spawn(
    module: str, jobdir: Path, cwd: str, env: dict[str, str], spec: JobSpec, key: bytes
) -> subprocess.Popen[bytes]:
    with (jobdir / LOG_FILE).open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", module, str(jobdir.resolve())],
            cwd=cwd,
            env=worker_env(env),
            stdin=subprocess.PIPE,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        _limit(proc.pid, spec.memory_limit_gb, spec.device.startswith("cuda"))
        assert proc.stdin is not None
        proc.stdin.write(key)
        proc.stdin.close()
    except (ProcessLookupError, BrokenPipeError, OSError):
        pass  # the worker already died; its exit status tells the story
    return proc


def _fork(
    module: str, jobdir: Path, cwd: str, env: dict[str, str], spec: JobSpec, key: bytes
) -> ForkedProcess | None:
    """The worker forked by the warm starter, its key on the way through a FIFO; None without a starter."""
    from kbench.sandbox import starter

    full = worker_env(env)
    fifo = jobdir / KEY_FIFO
    fifo.unlink(missing_ok=True)
    os.mkfifo(fifo, 0o600)
    full[KEY_FIFO_ENV] = str(fifo.resolve())
    limit = None
    if spec.memory_limit_gb > 0:
        name = "RLIMIT_DATA" if spec.device.startswith("cuda") else "RLIMIT_AS"
        limit = (name, int(spec.memory_limit_gb * 2**30))
    proc = starter.start_worker(module, jobdir, cwd, full, jobdir / LOG_FILE, limit)
    if proc is None:
        fifo.unlink(missing_ok=True)
        return None
    args = (fifo, key, proc, KEY_DELIVERY_S)
    threading.Thread(target=starter.deliver_key, args=args, name="kbench-key", daemon=True).start()
    return proc
