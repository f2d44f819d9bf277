"""Host side of the warm starter (sandbox/zygote.py): start workers by fork instead of `python -m`.

`start_worker` returns a `ForkedProcess` (pid, returncode, wait, poll: what sandbox/host.py uses of a
Popen) or None when no starter is usable, and the host then spawns the worker (a fresh interpreter). One starter runs
per interpreter start-up environment (PYTHONPATH and the like, which a fork cannot change); a starter that
died (a candidate may kill its parent) is replaced for the next job, and the jobs it had started are
followed through /proc. The key reaches the child through a FIFO (`deliver_key`).
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from kbench import entries
from kbench.sandbox import bytecode, procs
from kbench.sandbox.procs import KEY_FIFO_ENV, worker_env
from kbench.sandbox.starterwire import Answer, ForkRequest, Ready
from kbench.sandbox.zygote import LOST_EXIT as UNKNOWN_EXIT  # the starter died, or the status was lost
from kbench.sandbox.zygote import NO_OPTIONAL, REMOVE_CWD

START_TIMEOUT_S = 60.0  # the starter's own import of torch, on a loaded host
FORK_TIMEOUT_S = 120.0  # a request may wait for an optional preload in progress (seconds on a loaded host)
# The environment a forked child cannot take from its job: read once when the interpreter starts.
STARTUP_VARS = (
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONSAFEPATH",
    "LD_LIBRARY_PATH",
    "LD_PRELOAD",
    "PYTHONNOUSERSITE",
    "TRITON_INTERPRET",  # read when triton is imported, and the starter may preload triton
    "PYTHONPYCACHEPREFIX",  # where imports find bytecode (kbench/sandbox/bytecode.py)
    "OPENBLAS_NUM_THREADS",  # numpy's BLAS pool, sized when the starter imports numpy (procs.worker_env)
)
# A fork's wait split for a verdict's phases (ForkedProcess.start_phases, evaluate/phases.py)
START_PHASES = ("starter", "starter_start", "starter_torch", "starter_kbench")


def _alive(pid: int) -> bool:
    info = procs.info_of(pid)
    return info is not None and info.alive


class ForkedProcess:
    def __init__(self, starter: Starter, pid: int, waited_s: float = 0.0) -> None:
        self.starter, self.pid = starter, pid
        self.returncode: int | None = None
        self.waited_s = waited_s  # of the request's wait for its fork, the part spent waiting for the starter

    def start_phases(self) -> dict[str, float]:
        """How the fork's wait splits, for a verdict's phases (evaluate/phases.py): `starter`, the wait for
        the starter to come up; when there was one, the starter's own start (`starter_start`: from its
        launch to its answer) and its imports (`starter_torch`, `starter_kbench`: the worker modules)."""
        if self.waited_s < 0.005:
            return {"starter": round(self.waited_s, 3)}
        imports = self.starter.imports
        kbench = round(sum(v for k, v in imports.items() if k != "torch"), 3)
        values = (self.waited_s, self.starter.start_s, imports.get("torch", 0.0), kbench)
        return {k: round(v, 3) for k, v in zip(START_PHASES, values, strict=True)}

    def poll(self) -> int | None:
        if self.returncode is None:
            code = self.starter.exit_code(self.pid)
            if code is None and not self.starter.alive() and not _alive(self.pid):
                code = UNKNOWN_EXIT
            self.returncode = code
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"worker {self.pid}", timeout or 0.0)
            self.starter.wait_event(0.02 if deadline is None else min(0.02, deadline - time.monotonic()))
        assert self.returncode is not None
        return self.returncode


class Starter:
    """One zygote process and the thread that reads its messages."""

    def __init__(self, env: dict[str, str], optional_preload: bool = True) -> None:
        self._cwd = tempfile.TemporaryDirectory(prefix="kbench-starter-")
        self.log = Path(self._cwd.name) / "starter.log"
        self._lock = threading.Lock()
        self._closing = threading.Lock()
        self._changed = threading.Condition()
        self._started: dict[int, int] = {}  # request id -> pid (-1: refused)
        self._exits: dict[int, int] = {}
        self._live: set[int] = set()  # the workers it started that have not ended
        self._next = 0
        flags = [REMOVE_CWD, *([] if optional_preload else [NO_OPTIONAL])]
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", entries.STARTER, *flags],
                cwd=self._cwd.name,
                # its own imports (torch, kbench) may write bytecode; its workers' follow their jobs'
                env=env | bytecode.env(writes=True),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                start_new_session=True,
            )
        # The first line says whether it is ready (after its torch import: seconds); `wait_ready` waits
        # for it, so the process is launched at once and the caller goes on meanwhile.
        self.ready = False
        self.reason = "the starter did not answer in time"
        self._answered = threading.Event()
        self.preloaded: list[str] = []  # beyond torch and kbench, as the starter reports them
        self.imports: dict[str, float] = {}  # seconds of each preload before its answer (zygote.main)
        self.start_s = 0.0  # from its launch to its answer (process start, imports, checks)
        self.retired = ""  # why the starter forks no more (a preload proved unsafe)
        threading.Thread(target=self._read, name="kbench-starter", daemon=True).start()

    def wait_ready(self, timeout: float = START_TIMEOUT_S) -> bool:
        """Whether the starter came up (closed if it did not, `reason` says why)."""
        self._answered.wait(timeout)
        if not self.ready:
            self.close()
        return self.ready

    def failed(self) -> bool:
        return self._answered.is_set() and not self.ready

    def _read(self) -> None:
        assert self.proc.stdout is not None
        first = self.proc.stdout.readline()
        try:
            if first:
                answer: Ready = json.loads(first)
                self.imports = {str(k): float(v) for k, v in answer.get("imports", {}).items()}
                self.start_s = float(answer.get("age", 0.0))
                self.ready, self.reason = bool(answer.get("ready")), str(answer.get("reason", ""))
            else:
                self.reason = f"the starter exited ({self.log.read_text(errors='replace')[-500:]})"
        except (ValueError, TypeError, AttributeError, OSError) as exc:
            self.reason = f"the starter's first line was not understood ({exc})"
        finally:
            self._answered.set()
        if not self.ready:
            return
        for line in self.proc.stdout:
            msg: Answer = json.loads(line)
            with self._changed:
                if "started" in msg:
                    self._started[msg["started"]] = msg["pid"]
                    self._live.add(msg["pid"])
                elif "refused" in msg:
                    self._started[msg["refused"]] = -1
                elif "preloaded" in msg:
                    self.preloaded.append(str(msg["preloaded"]))
                elif "retired" in msg:
                    self.retired = str(msg["retired"])
                elif "exit" in msg:
                    self._exits[msg["exit"]] = msg["code"]
                    self._live.discard(msg["exit"])
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def usable(self) -> bool:
        return self.alive() and not self.retired

    def idle(self) -> bool:  # ready and usable, every worker it started ended (their exits reported)
        with self._changed:
            return self.ready and self.usable() and not self._live

    def exit_code(self, pid: int) -> int | None:
        with self._changed:
            return self._exits.pop(pid, None)

    def wait_event(self, timeout: float) -> None:
        with self._changed:
            self._changed.wait(max(timeout, 0.001))

    def start(self, request: ForkRequest, waited_s: float = 0.0) -> ForkedProcess | None:
        """Fork a worker for `request` (see zygote.py); None when the starter is gone. `waited_s`: how long
        the request waited for this starter to come up (ForkedProcess.start_phases)."""
        with self._lock:
            if not self.alive():
                return None
            self._next += 1
            ident = request["id"] = self._next
            assert self.proc.stdin is not None
            try:
                self.proc.stdin.write((json.dumps(request) + "\n").encode())
                self.proc.stdin.flush()
            except (BrokenPipeError, OSError):
                return None
        deadline = time.monotonic() + FORK_TIMEOUT_S
        with self._changed:
            while ident not in self._started:
                if not self.alive() or time.monotonic() > deadline:
                    return None
                self._changed.wait(0.05)
            pid = self._started.pop(ident)
        return ForkedProcess(self, pid, waited_s) if pid > 0 else None

    def close(self, wait_s: float = 5.0) -> None:
        """Close the starter's pipe: it ends the sessions of the workers it started and exits (killed
        after `wait_s`; its workers then die with it, `procs.die_with_parent`). Safe to call from several
        threads (each job waiting for a starter that failed closes it)."""
        with self._closing:
            if self.proc.poll() is None and not self._answered.is_set():
                # Still importing torch: it has started nothing yet, and would read the closed pipe only
                # once its import is done (seconds that a command ending early, on a bad flag, would wait).
                self.proc.kill()
                self.proc.wait()
            if self.proc.poll() is None:
                try:
                    assert self.proc.stdin is not None
                    self.proc.stdin.close()
                    self.proc.wait(timeout=wait_s)
                except (OSError, ValueError, subprocess.TimeoutExpired):
                    self.proc.kill()
                    self.proc.wait()
            self._cwd.cleanup()


_starters: dict[tuple[str, ...], Starter] = {}
_retired: list[Starter] = []  # replaced while their workers may still run: closed at exit
_failed: dict[tuple[str, ...], str] = {}
_guard = threading.Lock()


def _signature(env: dict[str, str]) -> tuple[str, ...]:
    return (sys.executable, *(env.get(v, "") for v in STARTUP_VARS))


def starter_for(env: dict[str, str], optional_preload: bool = True, wait: bool = True) -> Starter | None:
    """The live starter for this start-up environment, started on first use; None if it cannot run.
    `optional_preload` is decided by the call that starts it (zygote.serve). `wait=False` only launches
    it (returns None): the first job waits for it to be ready."""
    key = _signature(env)
    with _guard:
        if key in _failed:
            return None
        found = _starters.get(key)
        if found is not None and found.failed():
            _failed[key] = found.reason
            del _starters[key]
            found.close()
            return None
        if found is None or not found.usable():
            if found is not None and found.alive():
                _retired.append(found)
            found = Starter({k: v for k, v in env.items() if k != KEY_FIFO_ENV}, optional_preload)
            _starters[key] = found
    if not wait:
        return None
    if not found.wait_ready():
        with _guard:
            _failed[key] = found.reason
            if _starters.get(key) is found:
                del _starters[key]
        return None
    return found


def prewarm(env: dict[str, str] | None = None, one_shot: bool = False) -> None:
    """Launch the warm starter for the usual worker environment now, so its torch import (2-10 s) overlaps
    the caller's own imports and set-up instead of delaying its first worker. `one_shot`: the caller
    evaluates one candidate and exits, so the starter preloads nothing beyond what every worker imports
    (an optional preload would only hold up its requests)."""
    starter_for(worker_env(env or {}), not one_shot, wait=False)


_torch_import: list[threading.Thread] = []  # this process's own torch import on a thread, once


def import_torch_meanwhile() -> None:
    """Start this process's own torch import on a thread, once (later calls do nothing): the host needs
    torch only to read and compare outputs, after its workers started, so it is loaded when they finish
    instead of delaying what comes next. Call it after `prewarm`: a thread started beside that import
    competes with it for the GIL, which the import holds for long stretches."""
    with _guard:
        if _torch_import:
            return
        _torch_import.append(threading.Thread(target=_import_torch, name="kbench-import-torch", daemon=True))
    _torch_import[0].start()


def _import_torch() -> None:
    with contextlib.suppress(Exception):  # the command reports a missing or broken torch where it needs it
        import torch  # noqa: F401


_cuda_ready: set[str] = set()  # devices whose torch CUDA start this process has begun on a thread


def start_torch_cuda_meanwhile(device: str) -> None:
    """Start torch's CUDA state for `device` on a thread, once per device: called when the host has just
    offered device buffers (the driver's context is already up), so its comparison on the device, seconds
    later, does not pay torch's own CUDA start first (0.3-0.7 s on an H200 host). No kernel runs: a
    worker may hold the GPU meanwhile."""
    with _guard:
        if device in _cuda_ready:
            return
        _cuda_ready.add(device)
    threading.Thread(target=_start_torch_cuda, args=(device,), name="kbench-torch-cuda", daemon=True).start()


def _start_torch_cuda(device: str) -> None:
    for thread in _torch_import:
        thread.join()
    with contextlib.suppress(Exception):  # the comparison starts it itself, and reports what fails there
        import torch

        torch.cuda.init()
        torch.cuda.get_device_properties(torch.device(device))


def start_worker(
    module: str,
    jobdir: Path,
    cwd: str,
    env: dict[str, str],
    log: Path,
    limit: tuple[str, int] | None,
    args: list[str] | None = None,
    scratch: list[str] | None = None,
    preload: list[str] | None = None,
) -> ForkedProcess | None:
    t0 = time.monotonic()
    starter = starter_for(env)
    if starter is None:
        return None
    waited = time.monotonic() - t0
    request = ForkRequest(id=0, module=module, jobdir=str(jobdir.resolve()), cwd=cwd, env=env, log=str(log),
                          limit=limit, args=args or [], scratch=scratch or [], preload=preload or [])  # fmt: skip
    return starter.start(request, waited)


def failure_reason(env: dict[str, str]) -> str | None:
    """Why no starter runs for this environment (None: one runs or was never tried)."""
    return _failed.get(_signature(env))


def deliver_key(fifo: Path, key: bytes, proc: ForkedProcess, timeout_s: float) -> None:
    """Write `key` into `fifo` once the worker opens it (it does so first thing); give up when the worker
    ends or `timeout_s` passes (the worker then cannot sign a result: a crash, not a wrong verdict)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno not in (errno.ENXIO, errno.EINTR):
                return
            time.sleep(0.005)
            continue
        try:
            os.set_blocking(fd, True)
            os.write(fd, key)
        finally:
            os.close(fd)
        return


@atexit.register
def _close_all() -> None:
    for starter in [*_starters.values(), *_retired]:
        starter.close()


def kill_all() -> None:
    """End every starter now, and every worker it forked (a signal; the last Evaluator dropping its jobs).
    Forgotten, not failed: one ended while starting would read as one that cannot start, and this process
    would then spawn every later worker."""
    ended = [*_starters.values(), *_retired]  # no lock: this runs in signal handlers too
    _starters.clear()
    _retired.clear()
    for starter in ended:
        starter.close(wait_s=1.0)


def end_workers() -> None:
    """End every worker a starter forked (the last Evaluator closing): a starter with one still running, or
    one still starting, is ended with it (as `kill_all`); an idle one stays, the next Evaluator's first job
    forked at once rather than after a torch import (2-10 s), and ends with the process (`_close_all`)."""
    with _guard:
        busy = {key: s for key, s in _starters.items() if not s.idle()}
        ended = [*_retired, *busy.values()]
        _retired.clear()
        for key in busy:
            del _starters[key]
    for starter in ended:
        starter.close(wait_s=1.0)
