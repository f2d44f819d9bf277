"""The walls around a process that runs candidate code: namespaces, environment, limits, cores.

A candidate runs as the same user as kbench. Landlock (sandbox/confine.py) decides what it may write and
read; this module gives it a world of its own besides:

- **Namespaces** (`enter`): a user namespace always, so a candidate started by root keeps no capability
  over the machine (no kernel modules, no ptrace of kbench's processes, no mounts outside its own); on
  the CPU also a PID namespace (the candidate's runner is its init: when it ends the kernel kills every
  process it left, whatever `setsid` or double fork it used, and a fresh /proc shows none of the host's
  processes), a mount namespace (that /proc, and a size-capped memory file system for its temporary
  files) and a network namespace (no network at all). CUDA's interprocess memory handles do not cross PID
  namespaces, so a GPU runner keeps the host's PID namespace; there the job's trusted side is a child
  subreaper (`subreaper`), so whatever a candidate leaves behind becomes its child and is ended with the
  job, and its Landlock reads leave out every process's folder in /proc (`confine.without_processes`).
  `describe` says what held; where the kernel refuses a namespace the job runs without it and says so.
- **Environment** (`scrubbed_env`): a worker gets the variables it needs to run Python, torch, CUDA,
  Triton and the compilers, and nothing else of the user's (API keys, tokens, credentials).
- **Dumpable** (`protect_self`): kbench's own processes (the host, the warm starter, each job's trusted
  side) are not dumpable, so a process without CAP_SYS_PTRACE over them -- any candidate, which holds
  capabilities in its own user namespace only -- cannot read their memory or their /proc environ.
- **Limits** (`limit_self`): open files, file size (a log or temporary file the kernel stops at a bound),
  processes where the kernel counts them, core dumps off.
- **Cores** (`pin`): the CPUs a worker may run on, set by trusted code for the reference and the
  candidate alike.
"""

from __future__ import annotations

import ctypes
import errno
import os
import re
import resource
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from kbench.sandbox import procs

# clone(2) flags, the same on every Linux architecture
CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
_MS_REC, _MS_PRIVATE, _MS_NOSUID, _MS_NODEV = 0x4000, 0x40000, 0x2, 0x4
_PR_SET_DUMPABLE, _PR_SET_CHILD_SUBREAPER = 4, 36


@dataclass(frozen=True)
class Walls:
    """Which namespaces a runner gets, and its limits (JobSpec.walls, decided by the host)."""

    user: bool = True
    pid: bool = False  # CPU jobs: the runner is its namespace's init
    net: bool = False
    mount: bool = True  # a private /proc (with pid) and a capped temporary folder
    tmp_mib: int = 2048  # the memory file system on the runner's working folder: all it may write (mount)
    files: int = 4096  # open files (RLIMIT_NOFILE)
    file_mib: int = 1024  # largest file it may write (RLIMIT_FSIZE); logs are capped separately
    procs: int = 256  # the job's processes and threads (`tasks`), where a cgroup or RLIMIT_NPROC counts them


def for_device(device: str, confined: bool) -> Walls | None:
    """The walls of a candidate's runner on `device`; None when confinement is off (debugging)."""
    if not confined:
        return None
    cpu = not device.startswith("cuda")
    return Walls(pid=cpu, net=cpu)


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _prctl(option: int, value: int) -> bool:
    return _libc().prctl(ctypes.c_int(option), ctypes.c_ulong(value), 0, 0, 0) == 0


def protect_self() -> None:
    """Make this process non-dumpable: its memory, environ and file descriptors in /proc then need
    CAP_SYS_PTRACE over it, which no candidate holds (it has capabilities only in its own user
    namespace). Idempotent; silent where prctl is missing."""
    try:
        _prctl(_PR_SET_DUMPABLE, 0)
    except (OSError, AttributeError):
        pass


def subreaper() -> bool:
    """Become the reaper of this process's orphaned descendants (a process that double-forks or calls
    setsid stays below it); True when the kernel agreed."""
    try:
        return _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    except (OSError, AttributeError):
        return False


class Refused(Exception):
    """The kernel refused a namespace; the message says which and why."""


def _unshare(flags: int) -> None:
    if _libc().unshare(ctypes.c_int(flags)) != 0:
        code = ctypes.get_errno()
        raise Refused(os.strerror(code) + (" (user namespaces disabled?)" if code == errno.EPERM else ""))


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def enter(walls: Walls) -> list[str]:
    """Unshare the namespaces `walls` asks for (the caller must run one thread). With `pid`, the caller's
    next child is the new namespace's init: fork once more and run the job there (`fork_init`). Returns
    the namespaces entered; raises Refused when the user namespace, which the others need, is refused."""
    uid, gid = os.geteuid(), os.getegid()
    done = []
    if walls.user:
        _unshare(CLONE_NEWUSER)
        # root inside, the caller's own ids outside: capabilities over this namespace only
        try:
            _write("/proc/self/setgroups", "deny")
        except OSError:
            pass  # before Linux 3.19 there is no such file, and no need
        _write("/proc/self/uid_map", f"0 {uid} 1")
        _write("/proc/self/gid_map", f"0 {gid} 1")
        done.append("user")
    for flag, name, wanted in (
        (CLONE_NEWNS, "mount", walls.mount),
        (CLONE_NEWPID, "pid", walls.pid),
        (CLONE_NEWNET, "net", walls.net),
    ):
        if not wanted:
            continue
        try:
            _unshare(flag)
            done.append(name)
        except Refused:
            continue  # say what held; the rest stands
    if "mount" in done:
        _mount(None, "/", None, _MS_REC | _MS_PRIVATE)  # nothing mounted here reaches the host
    return done


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = lambda s: None if s is None else s.encode()  # noqa: E731
    if _libc().mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)) != 0:
        code = ctypes.get_errno()
        raise Refused(f"mount {target}: {os.strerror(code)}")


def mount_proc() -> bool:
    """In a PID namespace's init with a mount namespace of its own: a /proc that shows this namespace's
    processes only. False where the kernel refused (the host's /proc stays)."""
    try:
        _mount("proc", "/proc", "proc", _MS_NOSUID | _MS_NODEV)
        return True
    except Refused:
        return False


def mount_tmp(path: Path, mib: int) -> bool:
    """A memory file system of at most `mib` MiB on `path` (in this mount namespace only), holding what
    `path` held (its folders and files, copied in): what the candidate writes there is bounded and
    vanishes with it."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        below = os.open(path, os.O_RDONLY | os.O_DIRECTORY)  # the folder the mount will cover
    except OSError:
        return False
    try:
        _mount("tmpfs", str(path), "tmpfs", _MS_NOSUID | _MS_NODEV, f"size={mib}m,mode=0700")
        _copy_tree(f"/proc/self/fd/{below}", str(path))
        return True
    except (Refused, OSError):
        return False
    finally:
        os.close(below)


def _copy_tree(source: str, target: str) -> None:
    import shutil

    for entry in os.scandir(source):
        if entry.is_dir(follow_symlinks=False):
            os.mkdir(os.path.join(target, entry.name), 0o700)
            _copy_tree(entry.path, os.path.join(target, entry.name))
        elif entry.is_file(follow_symlinks=False):
            shutil.copyfile(entry.path, os.path.join(target, entry.name))


CGROUP_PREFIX = "kbench-"  # a runner's pids cgroup: kbench-<its pid>, removed with its job (`drop_cgroup`)


def _pids_root() -> Path | None:
    """The folder of this process's cgroup under a writable pids controller (cgroup v1's `pids`
    hierarchy, or v2's unified one where it offers `pids`), None where there is none."""
    try:
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
        groups = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    v1 = {parts[1]: parts[2] for line in groups if len(parts := line.split(":", 2)) == 3}
    for line in mounts:
        fields = line.split()
        if " - " not in line:
            continue
        kind, options = line.split(" - ", 1)[1].split()[0], line.split(" - ", 1)[1].split()[-1]
        point = Path(fields[4])
        if kind == "cgroup" and "pids" in options.split(","):
            base = point / v1.get("pids", "/").lstrip("/")
        elif kind == "cgroup2" and "pids" in _read(point / "cgroup.controllers").split():
            base = point / v1.get("", "/").lstrip("/")
        else:
            continue
        if os.access(base, os.W_OK):
            return base
    return None


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def cgroup_pids(limit: int) -> str:
    """This process, and every process it starts, in a cgroup of its own whose pids.max is `limit`: the
    cap on processes that binds root (whom RLIMIT_NPROC does not). Made before the user namespace (inside
    it the host's cgroups are not writable). The cgroup's folder, '' where no pids controller is
    writable here."""
    base = _pids_root()
    if base is None:
        return ""
    folder = base / f"{CGROUP_PREFIX}{os.getpid()}"
    try:
        folder.mkdir(exist_ok=True)
        (folder / "pids.max").write_text(str(limit))
        (folder / "cgroup.procs").write_text(str(os.getpid()))
    except OSError:
        return ""
    return str(folder)


def stale_cgroups(base: Path | None = None) -> list[Path]:
    """The runners' pids cgroups nobody uses any more: no process left in it and its runner gone (a
    referee killed before it removed it). Empty, so removing one (`rmdir`) frees it: the next job's
    referee does (`drop_cgroup`), and `kbench doctor --kill`."""
    base = base or _pids_root()
    if base is None:
        return []
    stale = []
    for folder in sorted(base.glob(f"{CGROUP_PREFIX}*")):
        pid = folder.name.removeprefix(CGROUP_PREFIX)
        runner = procs.info_of(int(pid)) if pid.isdigit() else None
        if pid.isdigit() and not (runner and runner.alive) and not _read(folder / "cgroup.procs").strip():
            stale.append(folder)
    return stale


def drop_cgroup(pid: int) -> None:
    """Remove the pids cgroup of the runner `pid` once its processes are gone (nothing where it had none),
    and any a killed referee left (`stale_cgroups`)."""
    base = _pids_root()
    if base is None:
        return
    for folder in [base / f"{CGROUP_PREFIX}{pid}", *stale_cgroups(base)]:
        try:
            folder.rmdir()
        except OSError:
            pass


def tasks(walls: Walls) -> int:
    """The cap on a job's processes and threads together (the kernel counts both, in a pids cgroup and in
    RLIMIT_NPROC): the walls' `procs`, plus room for the thread pools torch, OpenMP, CUDA and Triton
    start, which grow with the cores (two a core)."""
    return walls.procs + 2 * (os.cpu_count() or 1)


def limit_self(walls: Walls) -> None:
    """Open files, file size and core dumps for this process and what it starts; processes per user where
    the kernel counts them (not for root, whom RLIMIT_NPROC does not bind: `cgroup_pids` then)."""
    for which, value in (
        (resource.RLIMIT_NOFILE, walls.files),
        (resource.RLIMIT_FSIZE, walls.file_mib << 20),
        (resource.RLIMIT_CORE, 0),
    ):
        _lower(which, value)
    if os.getuid() != 0:
        _lower(resource.RLIMIT_NPROC, _user_processes() + tasks(walls))


def _lower(which: int, value: int) -> None:
    soft, hard = resource.getrlimit(which)
    cap = value if hard == resource.RLIM_INFINITY else min(value, hard)
    try:
        resource.setrlimit(which, (cap, cap))
    except (ValueError, OSError):
        pass


def _user_processes() -> int:
    uid = os.getuid()
    count = 0
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else []:
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid:
                    count += 1
            except OSError:
                continue
    return count


def pin(pid: int, cores: Iterable[int]) -> list[int]:
    """Run `pid` (and the threads it starts from now on) on `cores` only; the cores set, or [] where
    the kernel refused. The cores themselves come from `share_cores`."""
    wanted = sorted(set(cores))
    if not wanted:
        return []
    try:
        os.sched_setaffinity(pid, wanted)
    except OSError:
        return []
    return wanted


def share_cores(threads: int, lane: int = 0) -> list[int]:
    """The cores of CPU lane `lane` (executors/local.py): the `threads` cores after the first `lane` groups
    of this process's cores, the same for every worker of that lane's evaluation, so the reference and the
    candidate are timed on the same cores and lanes side by side on disjoint ones. Lanes past the cores
    (only without timing: the executor refuses them otherwise) wrap round. [] for all of them."""
    try:
        mine = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return []
    if threads <= 0 or threads >= len(mine):
        return []
    start = lane * threads
    return sorted({mine[(start + k) % len(mine)] for k in range(threads)})


# What a worker's environment keeps of the host's: running Python, torch, CUDA, Triton and the compilers.
_KEEP_NAMES = frozenset(
    {
        "PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TERM", "SHELL",
        "PYTHONPATH", "PYTHONHOME", "PYTHONSAFEPATH", "PYTHONNOUSERSITE", "PYTHONDONTWRITEBYTECODE",
        "PYTHONPYCACHEPREFIX", "PYTHONUNBUFFERED", "PYTHONHASHSEED", "PYTHONWARNINGS", "VIRTUAL_ENV",
        "LD_LIBRARY_PATH", "LD_PRELOAD", "LIBRARY_PATH", "CPATH",
        "CC", "CXX", "CFLAGS", "CXXFLAGS", "LDFLAGS", "MAX_JOBS",
        "XDG_CACHE_HOME", "TMPDIR",
    }
)  # fmt: skip
_KEEP_PREFIXES = (
    "LC_", "CUDA_", "NVIDIA_", "NVCC_", "TORCH_", "PYTORCH_", "TORCHINDUCTOR_", "TRITON_",
    "OMP_", "KMP_", "GOMP_", "MKL_", "OPENBLAS_",
)  # fmt: skip
# kbench's own variables a worker reads; not every KBENCH_* (KBENCH_SERVE_TOKEN is a secret)
KBENCH_KEEP = frozenset(
    {
        "KBENCH_OWNER", "KBENCH_PARENT", "KBENCH_KEY_FIFO", "KBENCH_LEASE_DIR", "KBENCH_PYCACHE",
        "KBENCH_BUILD_RECIPE", "KBENCH_BUILD_PCH", "KBENCH_BUILD_OP_HEADERS", "KBENCH_DEVICE_OUTPUTS",
        "KBENCH_CACHE_DIR",
    }
)  # fmt: skip
# a variable whose name says it holds a secret is never kept, whatever its prefix
_SECRET = re.compile(r"(TOKEN|SECRET|PASSW|API_?KEY|ACCESS_KEY|CREDENTIAL|PRIVATE|AUTH)", re.I)


def kept(name: str) -> bool:
    """Whether a worker's environment keeps the host's variable `name`."""
    if _SECRET.search(name):
        return False
    return name in _KEEP_NAMES or name in KBENCH_KEEP or name.startswith(_KEEP_PREFIXES)


def scrubbed_env(
    base: Mapping[str, str] | None = None, extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """`base` (this process's environment) reduced to what workers need, plus `extra`, the job's own
    additions (kbench's settings, not the user's): every other variable -- API keys, service tokens,
    cloud credentials, proxies -- stays with the host."""
    source = os.environ if base is None else base
    env = {k: v for k, v in source.items() if kept(k)}
    env.update(extra or {})
    return env


def describe(done: Iterable[str], reaper: bool) -> str:
    """What held, for a verdict's `confinement`: "namespaces user+pid+mount+net" and/or "subreaper"."""
    parts = []
    names = list(done)
    if names:
        parts.append("namespaces " + "+".join(names))
    if reaper:
        parts.append("subreaper")
    return ", ".join(parts) if parts else "no namespaces"
