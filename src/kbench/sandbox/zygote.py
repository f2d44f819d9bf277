"""The warm starter (`python -m kbench.sandbox.zygote`): forks workers from a process that imported torch.

A worker started with `python -m` spends seconds importing torch before it does anything (2.3 s on a
quiet CPU core, 7-12 s on a GPU host while builders compile). This process imports torch and what kbench's
worker modules import once, never touches CUDA, and forks a child per job, which becomes a worker in a new
session exactly as a spawned one would: its own process group, the job's environment (set before any CUDA
use, so CUDA_VISIBLE_DEVICES still picks its GPU), working folder, log file, core dumps off, its memory
limit, every descriptor of this process closed. The HMAC key never passes through here: the host hands it
to the child through a FIFO in the job folder, so no later child finds an earlier job's key in memory.

Protocol: one JSON object per line, typed in sandbox/starterwire.py (Ready once, then a ForkRequest per
worker, answered Started or Refused; Exited, Preloaded and Retired as they happen). It stays
single-threaded, so forking is safe. When the host closes its stdin -- or dies, whatever the signal: the
kernel closes the pipe -- it kills the sessions of the children still running and exits; each child also
asked for SIGKILL when this process dies. A killed host removes nothing itself, so this process then
removes the folders each request named as the host's scratch for its worker and, started with REMOVE_CWD,
its own working folder. If importing torch initialised the CUDA driver (fork would then break CUDA in the
children), it answers ready=false and exits: the host spawns workers instead.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import resource
import select
import signal
import sys
import time
import traceback
from pathlib import Path

from kbench import entries
from kbench.files import write_atomic
from kbench.sandbox.starterwire import Answer, ForkRequest, Ready

# The workers and everything they import. The entry modules themselves (ENTRIES) are then dropped from
# sys.modules: runpy runs a module already there a second time, as __main__, and warns so into every job's
# log ("found in sys.modules ... may result in unpredictable behaviour"); their own code takes ~8 ms, while
# what they import (timing, problems, backends and cpp_extension's setuptools) took a reference worker
# 5 s to start on an H200 host when only torch was preloaded.
ENTRIES = (f"{entries.REFEREE}.__main__", entries.CANDIDATE_RUNNER, entries.REFERENCE_RUNNER)
# What a referee imports once forked, to run its role (its job, feed, checks, timing loop, builds and the
# problem loader): imported here, every fork would otherwise read (or, without bytecode, compile) ~30
# modules again, 30-60 ms of every verdict's two referees. Pure Python: no thread, no CUDA.
REFEREE = (
    "kbench.referee.candidate", "kbench.referee.reference", "kbench.referee.builds", "kbench.referee.perfshare",
    "kbench.problems", "kbench.problems.compare", "kbench.backends.cpp", "kbench.backends.cuda",
)  # fmt: skip
PRELOAD = ("torch", *ENTRIES, *REFEREE)
# What some workers import next (2-6 s on a busy GPU host), preloaded once a request says its worker
# imports it (ForkRequest.preload, from evaluate/plan.worker_preloads) and only after a forked probe showed
# that importing it initialises no CUDA and starts no thread, so a module that would make forking unsafe is
# left to the workers instead of ruining the starter.
OPTIONAL_PRELOAD = ("torch.utils.cpp_extension", "torch._dynamo", "triton.testing")
# What runs once a module is preloaded, for every worker forked after it: Triton's cache key (its digest of
# its own sources and library), which each worker would otherwise compute at its first launch (0.4 s).
AFTER_PRELOAD = {"triton.testing": ("kbench.backends.triton", "prewarm_cache_key")}
NO_OPTIONAL = "--no-optional-preload"  # argument: fork workers only, preload nothing more (serve)
_children: dict[int, list[str]] = {}  # workers forked, not yet reaped -> their scratch folders (ForkRequest)
LOST_EXIT = 255  # a worker's exit status that another waiter took (sandbox/starter.py's UNKNOWN_EXIT)
# argument: this process's working folder is the host's scratch, removed when this process ends
REMOVE_CWD = "--remove-cwd"
_PROTO = 1  # the host's pipe; main() moves it off fd 1 so nothing printed can corrupt it


def _send(message: Answer | Ready) -> None:
    data = (json.dumps(message) + "\n").encode()
    while data:
        data = data[os.write(_PROTO, data) :]


_CUDA_ERROR_NOT_INITIALIZED = 3


def cuda_initialized() -> bool:
    """True when the CUDA driver was initialised (cuInit) in this process: CUDA breaks in children forked
    after that. Having the driver library mapped is not enough (torch 2.11's CUDA build maps it on import
    and never initialises it there): the driver is asked through `cuCtxGetCurrent`, which answers
    CUDA_ERROR_NOT_INITIALIZED before cuInit and changes nothing."""
    try:
        with open("/proc/self/maps") as maps:
            if not any("libcuda.so" in line for line in maps):
                return False
        driver = ctypes.CDLL("libcuda.so.1", mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
        context = ctypes.c_void_p()
        return int(driver.cuCtxGetCurrent(ctypes.byref(context))) != _CUDA_ERROR_NOT_INITIALIZED
    except (OSError, AttributeError):
        return True  # cannot tell: do not fork


def _threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 0


def _import(name: str) -> None:
    """Import `name` with torch's CUDA check answered by NVML: a module that asks torch.cuda.is_available()
    at import (torch.utils.cpp_extension does, where it finds a CUDA toolkit) would otherwise initialise the
    CUDA driver, which breaks CUDA in every child forked after."""
    env = "PYTORCH_NVML_BASED_CUDA_CHECK"
    before = os.environ.get(env)
    os.environ[env] = "1"
    try:
        __import__(name)
    finally:
        if before is None:
            os.environ.pop(env, None)
        else:
            os.environ[env] = before


def _fork_safe_import(name: str) -> bool:
    """Import `name` in a forked probe first; True if it imported there without initialising CUDA or
    starting a thread (the caller then imports it here)."""
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            _unwatch()
            from kbench.sandbox import procs

            procs.die_with_parent(parent)
            before = _threads()
            _import(name)
            torch = sys.modules["torch"]
            code = (
                0 if not (torch.cuda.is_initialized() or cuda_initialized()) and _threads() <= before else 3
            )
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


PROBES_FILE = "starter-probes.json"


def _probe_key(name: str) -> str:
    """What a probe's answer depends on: the interpreter, the module's distribution version, the
    environment variables that change how it binds at import."""
    from importlib import metadata

    try:
        version = metadata.version(name.split(".")[0])
    except metadata.PackageNotFoundError:
        version = "?"
    env = ",".join(os.environ.get(v, "") for v in ("TRITON_INTERPRET", "LD_PRELOAD", "CUDA_VISIBLE_DEVICES"))
    return f"{sys.executable}|{sys.version.split()[0]}|{name}|{version}|{env}"


def _probes() -> tuple[Path, dict[str, bool]]:
    from kbench.files import default_cache_dir

    path = default_cache_dir() / PROBES_FILE
    try:
        known = json.loads(path.read_text())
        return path, {k: bool(v) for k, v in known.items()} if isinstance(known, dict) else {}
    except (OSError, ValueError):
        return path, {}


def _remember(path: Path, known: dict[str, bool]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(known, indent=1))
    except OSError:
        pass  # probing again next time costs seconds, nothing more


def _preload(name: str, path: Path, known: dict[str, bool]) -> bool:
    """Import `name` here if its forked probe showed it fork-safe; True when it was imported. A probe costs
    a second import of the module (2-6 s for torch._dynamo on a busy host), so its answer is remembered
    per version; the import here is still checked, and a module that then starts a thread or initialises
    CUDA makes this starter unusable (`Unsafe`) and is probed again next time."""
    key = _probe_key(name)
    if key not in known:
        known[key] = _fork_safe_import(name)
        _remember(path, known)
    if not known[key]:
        return False
    before = _threads()
    _import(name)
    if name in AFTER_PRELOAD:
        module, function = AFTER_PRELOAD[name]
        getattr(__import__(module, fromlist=[function]), function)()
    if cuda_initialized() or _threads() > before:
        known.pop(key, None)
        _remember(path, known)
        raise Unsafe(f"importing {name} started a thread or initialised CUDA")
    return True


class Unsafe(Exception):
    """This process can no longer fork workers safely."""


def _child(req: ForkRequest) -> None:
    """Become the worker for `req`; never returns."""
    code = 1
    try:
        _unwatch()
        from kbench.sandbox import procs

        procs.die_with_parent(req["starter"])
        os.setsid()
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        # Bytecode as a worker started with this environment would have it: a candidate's worker says
        # PYTHONDONTWRITEBYTECODE and writes none (kbench/sandbox/bytecode.py), the starter's own imports did.
        sys.dont_write_bytecode = bool(os.environ.get("PYTHONDONTWRITEBYTECODE"))
        sys.pycache_prefix = os.environ.get("PYTHONPYCACHEPREFIX") or None
        log = os.open(req["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.closerange(3, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
        sys.stdin = open(0, closefd=False)  # noqa: SIM115
        sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if req["limit"]:
            name, limit = req["limit"]  # a JSON list: [resource name, bytes]
            resource.setrlimit(getattr(resource, str(name)), (int(limit), int(limit)))
        sys.path[0] = req["cwd"]  # as `python -m` would have it: the worker's own (empty) folder
        sys.argv = [req["module"], req["jobdir"], *req["args"]]
        import runpy

        runpy.run_module(req["module"], run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _reap(report: bool = True) -> None:
    """Report each worker that ended, waited for by its own pid. A wait for any child (waitpid(-1)) also
    took the processes a preloaded module started (a compiler or ldconfig probe) from under their Popen,
    which then waits for a pid the kernel may give a later worker and takes that worker's exit: the host
    waited for a report that never came. A worker whose status another waiter took is LOST_EXIT."""
    for pid in list(_children):
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done, status = pid, -1
        if done:
            _children.pop(pid, None)
            if report:
                _send({"exit": pid, "code": LOST_EXIT if status < 0 else os.waitstatus_to_exitcode(status)})


def _end_children() -> None:
    """Kill the sessions of the workers still running and, once they are reaped (at most ~1 s), remove the
    scratch folders the host made for them and for this process: a host that was killed removes nothing
    itself. Whether it was cannot be told here in time (its pipe closes before this process is given a new
    parent), and one that closed the pipe itself finds its folders gone, as it allows."""
    from kbench.sandbox import procs

    # no parent check from here on: run within this one, it would take the folders of workers already
    # reaped here out of its own list and exit before this one removed them
    signal.setitimer(signal.ITIMER_REAL, 0)
    for pid in list(_children):
        procs.kill_session(pid)
    scratch = [folder for folders in _children.values() for folder in folders]
    deadline = time.monotonic() + 1.0
    while _children and time.monotonic() < deadline:
        _reap(report=False)  # the host no longer reads (or is gone)
        time.sleep(0.005)
    if REMOVE_CWD in sys.argv[1:]:
        with contextlib.suppress(OSError):
            scratch.append(os.getcwd())
    import shutil

    for folder in scratch:
        shutil.rmtree(folder, ignore_errors=True)


def serve(optional: bool = True) -> None:
    """Fork a worker per request; while no request waits, preload the next OPTIONAL_PRELOAD module a
    request named (none with `optional` off: a one-shot `kbench eval` asks for its workers once).

    An optional module comes after "ready" and after the first worker that needs it, which imports it
    itself: before "ready", a cold `kbench eval` on an H200 host waited 6 s for its first fork. A request
    that arrives during such an import waits for it. Once a preload proves unsafe, requests are refused
    (the host spawns instead) and this process only reaps the workers it started."""
    buf = b""
    pending: list[str] = []
    asked: set[str] = set()  # every optional module a request named, preloaded or pending
    path, known = _probes()
    retired = False
    while True:
        readable, _, _ = select.select([0], [], [], 0.02)
        _reap()
        if not readable:
            if pending and not retired:
                name = pending.pop(0)
                try:
                    if _preload(name, path, known):
                        _send({"preloaded": name})
                except Unsafe as exc:
                    retired = True
                    _send({"retired": str(exc)})
            continue
        data = os.read(0, 1 << 16)
        if not data:
            _end_children()  # the host closed the pipe or died: nothing it started may outlive it
            return
        buf += data
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            req: ForkRequest = json.loads(line)
            req["starter"] = os.getpid()
            if retired:
                _send({"refused": req["id"]})
                continue
            pid = os.fork()
            if pid == 0:
                _child(req)
            _children[pid] = list(req.get("scratch", []))
            _send({"started": req["id"], "pid": pid})
            if optional:
                _ask(req.get("preload", []), asked, pending)


def _ask(names: list[str], asked: set[str], pending: list[str]) -> None:
    """Queue the optional modules of `names` that no request named before, in OPTIONAL_PRELOAD's order
    (a name outside it is ignored: only those are probed before they are imported here)."""
    new = [name for name in OPTIONAL_PRELOAD if name in names and name not in asked]
    asked.update(new)
    pending[:] = [name for name in OPTIONAL_PRELOAD if name in pending or name in new]


def _watch_parent() -> None:
    """End this process and its workers within 50 ms of the host's death, whatever this process is busy
    with (importing torch takes seconds): a SIGALRM every 50 ms compares the parent pid. A death signal
    from the kernel (PR_SET_PDEATHSIG) would follow the host *thread* that started this process, which
    may end long before the host; the pipe's EOF is only read between imports."""
    parent = os.getppid()

    def check(signum: int, frame: object) -> None:
        if os.getppid() != parent:
            _end_children()
            os._exit(0)

    signal.signal(signal.SIGALRM, check)
    signal.setitimer(signal.ITIMER_REAL, 0.05, 0.05)


def _unwatch() -> None:
    """In a forked child: no timer is inherited, but the handler is; a worker must not run it."""
    signal.signal(signal.SIGALRM, signal.SIG_DFL)


def main() -> int:
    global _PROTO
    _watch_parent()
    from kbench.sandbox.isolate import protect_self

    protect_self()  # every worker is forked from here: no candidate reads this process's memory
    _PROTO = os.dup(1)
    os.dup2(2, 1)  # stray prints of imported modules go to the log, not into the protocol
    seconds: dict[str, float] = {}  # each preload's import, for the host's account of a first fork's wait
    try:
        for name in PRELOAD:
            t0 = time.perf_counter()
            __import__(name)
            seconds[name] = round(time.perf_counter() - t0, 3)
        for name in ENTRIES:
            del sys.modules[name]
    except Exception as exc:  # the host spawns workers instead and the job reports its own error
        _send({"ready": False, "reason": f"preload failed: {type(exc).__name__}: {exc}"})
        return 1
    torch = sys.modules["torch"]
    if torch.cuda.is_initialized() or cuda_initialized():
        _send({"ready": False, "reason": "importing torch initialised CUDA: forked workers could not use it"})
        return 1
    from kbench.sandbox.procs import age

    _send({"ready": True, "reason": "", "imports": seconds, "age": round(age(), 3)})
    serve(optional=NO_OPTIONAL not in sys.argv[1:])
    os._exit(0)  # nothing to tear down: interpreter exit with torch loaded costs ~0.5 s of a stop


if __name__ == "__main__":
    sys.exit(main())
