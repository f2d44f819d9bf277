"""Confine a candidate worker with Landlock (worker side): where it may write, no TCP, no signals out.

The candidate worker runs as the same user as kbench, so without this its native code could write any of
the user's files (the reference's job folder, the reference cache, the results store, other jobs'
folders) and signal any of the user's processes (the host, other workers). `confine` asks the kernel
(Landlock, an unprivileged Linux security module, through raw system calls) to restrict the calling
thread and everything it starts afterwards, for good:

- writes (creating, removing, renaming, linking, truncating or opening a file for writing) only beneath
  the folders its caller names (a runner: its own run folder, where its tools keep their caches,
  referee/job.py; a builder: its staging folder), plus the GPU's, terminal and null device nodes (`device_nodes`; not /dev/shm, where other jobs' folders may live) and the worker's
  own thread files in /proc (the CUDA driver names its threads there);
- no TCP bind or connect (Landlock ABI 4 on);
- no signal to a process outside this worker and its children, no connection to an abstract unix socket
  bound outside them (ABI 6 on). A confined process cannot ptrace or read the memory of another
  process of the user outside its domain.

What this does not stop: reads where the caller names no `reads` (a runner's name the system's and
Python's folders and its job's own files), writes through descriptors opened before confinement, UDP and
unix sockets bound to a path, and anything on a kernel without Landlock: `confine` then changes nothing
and says why, and the verdict carries that answer (`WorkerResult.confinement`).

Landlock restricts the calling thread only (until ABI 8): the worker confines itself while it runs one
thread, before it imports torch's thread pools or the candidate; with more threads `confine` refuses.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import tempfile
from collections.abc import Iterable
from pathlib import Path

MIN_ABI = 2  # ABI 1 denies every rename or link between folders (the build cache renames its builds)
OFF = "none: turned off (setting confine = false)"

# System call numbers: the same on x86_64 and aarch64 (the generic table).
_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446
_ARCHES = ("x86_64", "aarch64")
_CREATE_RULESET_VERSION = 1 << 0
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

# Filesystem rights (linux/landlock.h). Executing stays unhandled; reading is handled only when a caller
# names the folders it may read (`confine(reads=...)`).
_WRITE_FILE = 1 << 1
_READ_FILE = 1 << 2
_READ_DIR = 1 << 3
_READS = _READ_FILE | _READ_DIR
_REMOVE_DIR = 1 << 4
_REMOVE_FILE = 1 << 5
_MAKE_CHAR = 1 << 6
_MAKE_DIR = 1 << 7
_MAKE_REG = 1 << 8
_MAKE_SOCK = 1 << 9
_MAKE_FIFO = 1 << 10
_MAKE_BLOCK = 1 << 11
_MAKE_SYM = 1 << 12
_REFER = 1 << 13  # ABI 2: renames and links between folders
_TRUNCATE = 1 << 14  # ABI 3
# IOCTL_DEV (ABI 5) stays unhandled: the CUDA driver talks to /dev/nvidia* through ioctls.
_WRITES_ABI1 = (
    _WRITE_FILE
    | _REMOVE_DIR
    | _REMOVE_FILE
    | _MAKE_CHAR
    | _MAKE_DIR
    | _MAKE_REG
    | _MAKE_SOCK
    | _MAKE_FIFO
    | _MAKE_BLOCK
    | _MAKE_SYM
)
_FILE_RIGHTS = _WRITE_FILE | _TRUNCATE | _READ_FILE  # the only rights a rule on a non-folder may grant
_NET_TCP = (1 << 0) | (1 << 1)  # ABI 4: bind, connect
_SCOPE_ALL = (1 << 0) | (1 << 1)  # ABI 6: abstract unix sockets, signals

_ERRORS = {
    errno.ENOSYS: "this kernel has no Landlock system calls",
    errno.EOPNOTSUPP: "Landlock is built in but not enabled (the kernel's lsm= boot list)",
}


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),  # ABI 4
        ("scoped", ctypes.c_uint64),  # ABI 6
    ]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1  # packed in the kernel's header: 12 bytes
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class _Refused(Exception):
    """Landlock could not be applied; the message says why (the worker then runs unconfined)."""


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _syscall(number: int, *args: object) -> int:
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    ret = int(libc.syscall(ctypes.c_long(number), *args))
    if ret < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return ret


def abi() -> tuple[int, str]:
    """This kernel's Landlock ABI version, or 0 and why there is none."""
    if platform.machine() not in _ARCHES:
        return 0, f"Landlock system calls are not wired up for {platform.machine()}"
    try:
        return _syscall(
            _CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION)
        ), ""
    except OSError as exc:
        return 0, _ERRORS.get(exc.errno or 0, f"Landlock refused: {exc.strerror}")


def _handled_fs(version: int) -> int:
    return _WRITES_ABI1 | (_REFER if version >= 2 else 0) | (_TRUNCATE if version >= 3 else 0)


def _ruleset(version: int, handled: int) -> int:
    attr = _RulesetAttr(handled, _NET_TCP if version >= 4 else 0, _SCOPE_ALL if version >= 6 else 0)
    # An older kernel takes only the fields it knows: 8 bytes up to ABI 3, 16 up to ABI 5.
    size = 8 if version < 4 else 16 if version < 6 else ctypes.sizeof(attr)
    return _syscall(_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))


def _allow(ruleset: int, path: Path, rights: int) -> None:
    """Allow `rights` beneath `path`; nothing when it cannot be opened (then nothing may write there)."""
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return
    try:
        rule = _PathBeneath(rights, fd)
        _syscall(
            _ADD_RULE,
            ctypes.c_long(ruleset),
            ctypes.c_long(_RULE_PATH_BENEATH),
            ctypes.byref(rule),
            ctypes.c_uint32(0),
        )
    finally:
        os.close(fd)


_DEVICES = ("null", "zero", "full", "random", "urandom", "tty", "ptmx", "pts")


def device_nodes(dev: Path = Path("/dev")) -> list[Path]:
    """The device nodes a worker may open for writing: the GPU's (`nvidia*`, folders such as nvidia-caps
    included) and the terminal and null devices. Not /dev/shm, the memory file system where job folders
    may live, and not the rest of /dev (memory, disks, the kernel log: a worker run as root could write
    them)."""
    found = []
    for name in sorted(os.listdir(dev)) if dev.is_dir() else []:
        path = dev / name
        if (name in _DEVICES or name.startswith("nvidia")) and not path.is_symlink():
            found.append(path)
    return found


def temp_folders() -> list[Path]:
    """The temporary folder of this process and of the programs it starts (nvcc, ninja, Triton's ptxas):
    Python's answer, which a worker forked by the warm starter inherited from it, and TMPDIR."""
    found = [Path(tempfile.gettempdir())]
    if os.environ.get("TMPDIR"):
        found.append(Path(os.environ["TMPDIR"]))
    return found


def triton_cache() -> Path:
    """Where Triton keeps compiled kernels (its `knobs.cache.dir`)."""
    if os.environ.get("TRITON_CACHE_DIR"):
        return Path(os.environ["TRITON_CACHE_DIR"])
    return Path(os.environ.get("TRITON_HOME") or Path.home(), ".triton", "cache")


def torch_extensions() -> Path:
    """Where `torch.utils.cpp_extension` builds what kbench's build cache does not take over (`load`,
    load_inline without a Python module): TORCH_EXTENSIONS_DIR, else torch's per-user cache folder."""
    if os.environ.get("TORCH_EXTENSIONS_DIR"):
        return Path(os.environ["TORCH_EXTENSIONS_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache", "torch_extensions")


def cuda_cache() -> Path:
    """The CUDA driver's cache of kernels it compiled from PTX (CUDA_CACHE_PATH)."""
    return Path(os.environ.get("CUDA_CACHE_PATH") or Path.home() / ".nv" / "ComputeCache")


def confine(folders: Iterable[Path], devices: bool = True, reads: Iterable[Path] | None = None) -> str:
    """Restrict this process (its calling thread, and every process it starts later) for good: writes
    only beneath `folders` (made when missing) and, with `devices`, to `device_nodes`; with `reads`,
    reads only beneath those and `folders` too (a file or a folder each); no TCP; no signal or abstract
    unix socket outside it. Returns what was applied, `landlock abi N` (`+reads` when reads are limited),
    or `none: WHY` when nothing was (no Landlock, an ABI older than MIN_ABI, more than one thread)."""
    version, why = abi()
    if version == 0:
        return f"none: {why}"
    if version < MIN_ABI:
        return f"none: Landlock ABI {version} is older than {MIN_ABI} (renames between folders would fail)"
    threads = _threads()
    if threads != 1:
        return f"none: {threads} threads running (Landlock confines the calling thread only)"
    limited = reads is not None
    handled = _handled_fs(version) | (_READS if limited else 0)
    grants = [(Path(f), handled) for f in folders]
    for path in reads or []:
        grants.append((Path(path), _READS if Path(path).is_dir() else _READ_FILE))
    # The CUDA driver names the threads it starts through /proc/self/task/TID/comm, and cuInit fails
    # ("OS call failed", error 304) when it cannot: writes to this process's own task files stay allowed.
    grants.append((Path(f"/proc/{os.getpid()}/task"), handled & _FILE_RIGHTS))
    if limited:
        grants.append((Path(f"/proc/{os.getpid()}"), _READS))
    for node in device_nodes() if devices else []:
        grants.append((node, handled if node.is_dir() else handled & _FILE_RIGHTS))
    try:
        _apply(version, grants, handled)
    except _Refused as exc:
        return f"none: {exc}"
    return f"landlock abi {version}" + ("+reads" if limited else "")


def _apply(version: int, grants: list[tuple[Path, int]], handled: int) -> None:
    try:
        ruleset = _ruleset(version, handled)
    except OSError as exc:
        raise _Refused(f"landlock_create_ruleset failed: {exc.strerror}") from None
    try:
        for path, rights in grants:
            if rights & _MAKE_DIR:  # a folder the worker writes beneath: made when missing
                try:
                    path.mkdir(parents=True, exist_ok=True)
                except OSError:
                    continue  # not creatable by this user: nothing of the worker can write there either
            _allow(ruleset, path, rights)
        if _libc().prctl(ctypes.c_int(_PR_SET_NO_NEW_PRIVS), ctypes.c_ulong(1), ctypes.c_ulong(0),
                         ctypes.c_ulong(0), ctypes.c_ulong(0)) != 0:  # fmt: skip
            raise _Refused(f"prctl(PR_SET_NO_NEW_PRIVS) failed: {os.strerror(ctypes.get_errno())}")
        _syscall(_RESTRICT_SELF, ctypes.c_long(ruleset), ctypes.c_uint32(0))
    except OSError as exc:
        raise _Refused(f"Landlock refused a rule: {exc.strerror}") from None
    finally:
        os.close(ruleset)


def _threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1  # no /proc: this cannot tell, and Landlock is Linux's


_SYSTEM_READS = ("/usr", "/lib", "/lib64", "/lib32", "/libx32", "/bin", "/sbin", "/etc", "/opt", "/sys")


def without_processes(reads: Iterable[Path], proc: Path = Path("/proc")) -> list[Path]:
    """`reads` with `proc` replaced by what of it names no process: for a runner that shares its PID
    namespace with the host's processes (a GPU runner, or one whose kernel refused the namespace), whose
    /proc shows them all. Kept: the system's entries (cpuinfo, meminfo, sys, driver, ...); dropped: every
    process's folder and the links into one (`self`, `mounts`, `net`), since an open follows the link to
    the opener's folder, which `confine` grants the runner itself. So a candidate reads neither the
    environment nor the command line of the user's other processes; what it starts cannot read its own
    folder either (Python's `subprocess` then closes descriptors without listing them)."""
    out: list[Path] = []
    for path in reads:
        if Path(path) != proc:
            out.append(Path(path))
            continue
        try:
            entries = sorted(proc.iterdir())
        except OSError:
            continue
        out.extend(e for e in entries if not e.name.isdigit() and not e.is_symlink())
    return out


def standard_reads(extra: Iterable[Path] = ()) -> list[Path]:
    """What any worker must read to run Python, torch, CUDA, Triton and the compilers, and nothing of the
    user's own files: the system's folders, the interpreter's prefixes and import path (an editable
    install's source included), the folders on PATH, the device nodes a worker may open and /proc (a
    PID namespace shows the runner only its own processes there), plus `extra`. Not the home folder, the
    temporary folder, /dev/shm (job folders), kbench's cache or results."""
    import sys
    import sysconfig

    found: list[Path] = [Path(p) for p in _SYSTEM_READS]
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    for key in ("stdlib", "platstdlib", "purelib", "platlib", "include", "scripts"):
        try:
            prefixes.add(sysconfig.get_paths()[key])
        except KeyError:
            continue
    prefixes.add(os.path.dirname(os.path.realpath(sys.executable)))
    for entry in [*prefixes, *sys.path, *os.environ.get("PATH", "").split(os.pathsep)]:
        if entry and os.path.isabs(entry):
            found.append(Path(entry))
            found.append(Path(os.path.realpath(entry)))
    for var in ("CUDA_HOME", "CUDA_PATH", "TRITON_HOME"):
        if os.environ.get(var):
            found.append(Path(os.environ[var]))
    for var in ("CC", "CXX"):  # a compiler named by path, wherever it is (a wrapper script is read to run)
        tool = os.environ.get(var, "").split()[0] if os.environ.get(var, "").strip() else ""
        if os.path.isabs(tool):
            found.append(Path(tool))
    found.append(Path("/proc"))
    found.extend(device_nodes())
    found.extend(extra)
    # Never a folder that holds the user's own files whole: the root, the home folder, the temporary one.
    too_wide = {"/", str(Path.home()), os.path.realpath(Path.home()), tempfile.gettempdir(), "/tmp", "/dev"}
    unique: dict[str, Path] = {}
    for path in found:
        if path.exists() and str(path) not in too_wide:
            unique.setdefault(str(path), path)
    return list(unique.values())
