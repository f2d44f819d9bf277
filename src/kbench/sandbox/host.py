"""Host side of the sandbox: spawn a worker process, limit it, time each of its phases, kill its session.

What this does: each worker is `python -m MODULE JOBDIR` (or the same module in a child forked by the
warm starter, sandbox/starter.py, which skips importing torch per job) in a new session (its own process
group), with a temporary working folder, core dumps off, an address-space limit (RLIMIT_AS) on CPU jobs
and a data limit (RLIMIT_DATA) on CUDA jobs, and a budget per phase: the worker announces each phase
(`protocol.announce`: lease, load, correctness, timing, build...) and the host kills the whole session
when one runs past its budget, naming that phase. After the worker ends, any process still in its
session is killed and reported.

Nothing outlives the kbench process that started it: every worker asks the kernel for SIGKILL when its
parent dies (`procs.die_with_parent`: the host for a spawned worker, the warm starter for a forked one,
and the starter ends its children's sessions when the host's pipe closes), and `stop_all` -- called by
the signal handlers of the CLI and at exit -- kills every live worker's session. A job interrupted that
way raises `Interrupted` instead of returning a verdict.

What this does not stop: the worker runs as the same user. Where the kernel has Landlock, a candidate
worker confines itself (sandbox/confine.py: writes only beneath its own folders, the build cache and the
temporary folder, no TCP, no signals to processes outside it), but it can still read the user's files,
write into the shared build cache, or escape the session with `setsid()` and keep running; the GPU is
shared with nothing else but not isolated either. Run untrusted candidates inside a container or VM
when that matters.

RLIMIT_AS is not used for CUDA jobs because the CUDA driver reserves far more virtual address space than
it commits (tens of GB for an H200's unified address range) and would fail to initialise under a limit
that bounds real use; RLIMIT_DATA counts only writable private mappings, so it bounds host memory.
"""

from __future__ import annotations

import atexit
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
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from kbench import entries
from kbench.sandbox import isolate, procs
from kbench.sandbox.procs import STOP_SIGNALS, worker_env
from kbench.sandbox.protocol import JOB_FILE, KEY_BYTES, KEY_FIFO_ENV, LOG_FILE, PHASE_FILE, JobSpec
from kbench.sandbox.starter import ForkedProcess

REFEREE = entries.REFEREE  # every job's process: it forks and commands the job's runner (kbench/referee/)
LOG_TAIL_LINES = 60
KEY_FIFO = "key.fifo"
KEY_DELIVERY_S = 600.0  # a forked worker opens its key FIFO first thing; a loaded host may be slow
START_BUDGET_S = 120.0  # a worker's own start-up before its first phase (importing torch: 2-12 s)
POLL_S = 0.05  # how often the host looks at a running worker's phase


class Interrupted(BaseException):
    """The kbench process was asked to stop (a signal): live workers were killed, no verdict is due.

    A BaseException, as KeyboardInterrupt is: `except Exception` in a stage must not swallow it."""

    def __init__(self, signum: int = signal.SIGINT) -> None:
        self.signum = signum
        self.kept = ""  # what the interrupted command kept (a run's stored verdicts), said on exit
        super().__init__(f"interrupted by {signal.Signals(signum).name}")

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


class Cancelled(Exception):
    """The caller cancelled a running job (`run_worker(cancel=...)`); its worker was killed."""


@dataclass(frozen=True)
class WorkerExit:
    returncode: int | None  # None when the host killed it at a phase's limit
    timed_out: bool
    seconds: float
    leftover: bool  # processes of the worker's session were still running after it ended
    log_tail: str
    key: bytes
    pgid: int = 0
    phase: str = ""  # the phase whose budget ran out (timed_out)
    budget_s: float = 0.0  # that phase's budget
    spawn_s: float = 0.0  # from the call to the worker's start (a fork, or the starter's own start first)
    # a fork's share of spawn_s spent waiting for the starter, and the starter's own start (ForkedProcess)
    start_phases: dict[str, float] = field(default_factory=dict)


_live: set[int] = set()  # sessions of running workers (a worker's pid leads its session)
_live_lock = threading.RLock()  # reentrant: the signal handler may interrupt its own thread holding it
_stopping: list[int] = []  # the signal that stopped this process, once one did


def stopping() -> bool:
    return bool(_stopping)


def stop_all(signum: int = signal.SIGTERM) -> None:
    """Stop this process's evaluations: kill every live worker's session and the warm starters; later
    `run_worker` calls raise `Interrupted`. Safe to call from a signal handler and more than once."""
    if not _stopping:
        _stopping.append(signum)
    with _live_lock:
        sessions = list(_live)
    for session in sessions:
        procs.kill_session(session)
    from kbench.sandbox import starter

    starter.kill_all()


@contextmanager
def stop_on_signals(signals: tuple[int, ...] = STOP_SIGNALS) -> Iterator[None]:
    """While inside: SIGINT, SIGTERM or SIGHUP kill every live worker (`stop_all`) and raise `Interrupted`
    in the main thread, once; the callers keep what finished and say so. A no-op off the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        first = not _stopping
        stop_all(signum)
        if first:
            raise Interrupted(signum)

    previous = {sig: signal.signal(sig, handler) for sig in signals}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _check_stop() -> None:
    if _stopping:
        raise Interrupted(_stopping[0])


@atexit.register
def _end_live_workers() -> None:
    with _live_lock:
        sessions = list(_live)
    for session in sessions:
        procs.kill_session(session)


LOG_TAIL_BYTES = 64 << 10  # of a worker's log the host reads: its end, whatever the file's size


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last `lines` lines of a log, reading at most its last LOG_TAIL_BYTES bytes: a candidate that
    printed gigabytes costs the host no more memory than one that printed nothing."""
    try:
        with path.open("rb") as fh:
            size = fh.seek(0, 2)
            fh.seek(max(0, size - LOG_TAIL_BYTES))
            text = fh.read(LOG_TAIL_BYTES).decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def _limit(pid: int) -> None:
    """No core dumps (a dump of the referee would hold its job's key). The memory limit is the runner's,
    which its referee sets (referee/job.py)."""
    resource.prlimit(pid, resource.RLIMIT_CORE, (0, 0))


Budgets = Mapping[str, float] | float  # phase -> seconds, in the order the worker announces them


def _phase_of(marker: Path, seen: list[int]) -> str | None:
    """The phase the worker last announced, read only when the file changed (`seen`: its mtime)."""
    try:
        mtime = marker.stat().st_mtime_ns
        if mtime == seen[0]:
            return None
        seen[0] = mtime
        return marker.read_text().strip()
    except OSError:
        return None


BACKSTOP_S = 30.0  # the host's grace beyond a phase's budget, which the job's referee keeps itself


def _wait(
    proc: subprocess.Popen[bytes] | ForkedProcess,
    jobdir: Path,
    budgets: Budgets,
    t0: float,
    cancel: threading.Event | None = None,
    backstop_s: float = 0.0,
) -> tuple[str, float] | None:
    """Wait for the worker; (phase, budget) of the phase that ran past its budget, or None if it ended.

    Before its first announcement a worker has START_BUDGET_S (or `budgets["start"]`): kbench's own
    start-up. Each announced phase of `budgets` restarts the clock with its own budget plus `backstop_s`;
    phases only move forward, once each, but for `build`, which a referee enters from the phase a build
    was asked for in and leaves back to it. A referee (trusted) keeps each budget itself and ends its
    runner on time: its `backstop_s` (BACKSTOP_S) only catches a referee that no longer answers. A float
    is one budget for the whole job."""
    plan = {"start": budgets} if isinstance(budgets, float | int) else dict(budgets)
    order = [name for name in plan if name != "start"]
    phase, budget, before_build = "start", float(plan.get("start", START_BUDGET_S)), ""
    deadline = t0 + budget + backstop_s
    marker, seen = jobdir / PHASE_FILE, [0]
    while True:
        announced = _phase_of(marker, seen) if order else None
        if announced in order and _moves(phase, announced, order, before_build):
            before_build = phase if announced == "build" else ""
            phase, budget = announced, float(plan[announced])
            deadline = time.monotonic() + budget + backstop_s
        remaining = deadline - time.monotonic()
        if remaining <= 0 or _stopping or (cancel is not None and cancel.is_set()):
            return phase, budget
        try:
            proc.wait(timeout=min(remaining, POLL_S))
            return None
        except subprocess.TimeoutExpired:
            continue


def _moves(phase: str, announced: str, order: list[str], before_build: str) -> bool:
    if announced == phase:
        return False
    if announced == "build" or (phase == "build" and announced == before_build):
        return True
    return phase == "start" or order.index(announced) > order.index(phase)


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
    budgets: Budgets,
    env: dict[str, str] | None = None,
    start: str = "auto",
    cancel: threading.Event | None = None,
    key: bytes | None = None,
    preload: Sequence[str] = (),
) -> WorkerExit:
    """Run `python -m module jobdir` for `spec` under the limits; returns for every outcome of the job,
    raises `Interrupted` when this process is being stopped (its worker is killed, no verdict is due).

    `budgets`: seconds per announced phase (see `_wait`). `start`: `fork` takes the worker from the warm
    starter (sandbox/starter.py: no torch import per job), `spawn` starts a new interpreter, `auto` forks
    when a starter runs here and spawns otherwise. Setting `cancel` kills the worker and raises
    `Cancelled` (its caller no longer needs the job). `key`: the job's HMAC key when the caller has used
    it already (evaluate/device_outputs.Receiver seals with it), else a new one. `preload`: the optional
    modules this worker imports, which the starter then preloads for the next ones (ForkRequest.preload).
    """
    _check_stop()
    asked = time.monotonic()
    # This process holds what a candidate must never read (API keys in its environment, a service's
    # token, expected outputs in its memory): from its first job on it is not dumpable, so no process of
    # its user without CAP_SYS_PTRACE over it -- a GPU runner shares its PID namespace -- reads its /proc.
    isolate.protect_self()
    jobdir.mkdir(parents=True, exist_ok=True)
    spec, env = one_gpu(spec, env)
    (jobdir / JOB_FILE).write_text(spec.model_dump_json())
    key = key or secrets.token_bytes(KEY_BYTES)
    with tempfile.TemporaryDirectory(prefix="kbench-cwd-") as cwd:
        proc: subprocess.Popen[bytes] | ForkedProcess | None = None
        if start != "spawn":
            proc = _fork(module, jobdir, cwd, env, spec, key, list(preload))
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
        pgid = proc.pid  # a new session makes the worker its group's and session's leader
        with _live_lock:
            _live.add(pgid)
        try:
            backstop = BACKSTOP_S if module == REFEREE else 0.0
            ran_out = _wait(proc, jobdir, budgets, t0, cancel, backstop)
            if ran_out is not None:
                procs.kill_session(pgid)
                if proc.poll() is None:
                    procs.kill(proc.pid)  # not yet its session's leader (setsid is its first step)
                proc.wait()
            seconds = time.monotonic() - t0
            leftover = procs.end_session(pgid)
        finally:
            with _live_lock:
                _live.discard(pgid)
    _check_stop()  # killed by stop_all: whatever it left is not the candidate's verdict
    if cancel is not None and cancel.is_set():
        raise Cancelled(f"{module} job cancelled by its caller")
    return WorkerExit(
        returncode=None if ran_out else proc.returncode,
        timed_out=ran_out is not None,
        seconds=seconds,
        leftover=leftover and ran_out is None,
        log_tail=log_tail(jobdir / LOG_FILE),
        key=key,
        pgid=pgid,
        phase=ran_out[0] if ran_out else "",
        budget_s=ran_out[1] if ran_out else 0.0,
        spawn_s=t0 - asked,
        start_phases=proc.start_phases() if isinstance(proc, ForkedProcess) else {},
    )


def _spawn(
    module: str, jobdir: Path, cwd: str, env: dict[str, str], spec: JobSpec, key: bytes
) -> subprocess.Popen[bytes]:
    full = worker_env(env) | {procs.PARENT_ENV: str(os.getpid())}  # the worker dies with this process
    with (jobdir / LOG_FILE).open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", module, str(jobdir.resolve()), spec.role],
            cwd=cwd,
            env=full,
            stdin=subprocess.PIPE,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        _limit(proc.pid)
        assert proc.stdin is not None
        proc.stdin.write(key)
        proc.stdin.close()
    except (ProcessLookupError, BrokenPipeError, OSError):
        pass  # the worker already died; its exit status tells the story
    return proc


def _fork(
    module: str, jobdir: Path, cwd: str, env: dict[str, str], spec: JobSpec, key: bytes, preload: list[str]
) -> ForkedProcess | None:
    """The worker forked by the warm starter, its key on the way through a FIFO; None without a starter."""
    from kbench.sandbox import starter

    full = worker_env(env)
    fifo = jobdir / KEY_FIFO
    fifo.unlink(missing_ok=True)
    os.mkfifo(fifo, 0o600)
    full[KEY_FIFO_ENV] = str(fifo.resolve())
    proc = starter.start_worker(
        module, jobdir, cwd, full, jobdir / LOG_FILE, None, [spec.role], [cwd], preload
    )
    if proc is None:
        fifo.unlink(missing_ok=True)
        return None
    args = (fifo, key, proc, KEY_DELIVERY_S)
    threading.Thread(target=starter.deliver_key, args=args, name="kbench-key", daemon=True).start()
    return proc
