"""The share of a CPU runner's time spent in the candidate's own code, sampled from outside (trusted).

On the CPU no profiler inside the runner can be trusted: the candidate runs there. The referee samples
the runner from its own process instead, with the kernel's performance events (`perf_event_open`, a
task-clock event per thread of the runner, inherited by the threads it starts): every `PERIOD_NS` of a
thread's run time the kernel records the instruction it was at. The instructions that fall in the
candidate's extension modules (the files the referee's builds put in the build cache, as the runner's
memory map shows them, less the bindings and templates compiled into them: `GLUE`, by the modules'
symbols), against those in the libraries that compute for PyTorch (its own libraries,
OpenMP's, BLAS and its kin: `LIBRARIES`), is the share. The interpreter, PyTorch's Python bindings and the
C and math libraries are left out of both: there the runner's command handling, which surrounds every
call, the candidate's Python wrapper, and the math functions both its kernels and PyTorch's call, look
alike. A candidate that calls a kernel of its own that does nothing, beside PyTorch operators
that do the work, gets a share near zero (`no-custom-kernel`).

Where the kernel refuses the events (`/proc/sys/kernel/perf_event_paranoid` above 2 without
CAP_PERFMON, a seccomp filter that forbids the call: some container runtimes' defaults) nothing is
measured and the verdict says so.
"""

from __future__ import annotations

import bisect
import ctypes
import functools
import mmap
import os
import re
import struct
from collections.abc import Callable
from pathlib import Path

PERIOD_NS = 50_000  # a sample every 50 us of a thread's run time
_PAGES = 16  # data pages per ring buffer (64 KiB: ~2,700 samples)
_NR_PERF_EVENT_OPEN = {"x86_64": 298, "aarch64": 241}
_PERF_TYPE_SOFTWARE, _SW_TASK_CLOCK = 1, 1
_SAMPLE_IP, _SAMPLE_TID = 1 << 0, 1 << 1
_DISABLED, _EXCLUDE_KERNEL, _EXCLUDE_HV = 1 << 0, 1 << 5, 1 << 6
_IOC_ENABLE, _IOC_DISABLE = 0x2400, 0x2401
_RECORD_SAMPLE = 9


class _Attr(ctypes.Structure):
    _fields_ = [
        ("type", ctypes.c_uint32),
        ("size", ctypes.c_uint32),
        ("config", ctypes.c_uint64),
        ("sample_period", ctypes.c_uint64),
        ("sample_type", ctypes.c_uint64),
        ("read_format", ctypes.c_uint64),
        ("flags", ctypes.c_uint64),
        ("wakeup_events", ctypes.c_uint32),
        ("bp_type", ctypes.c_uint32),
        ("config1", ctypes.c_uint64),
        ("config2", ctypes.c_uint64),
        ("branch_sample_type", ctypes.c_uint64),
        ("sample_regs_user", ctypes.c_uint64),
        ("sample_stack_user", ctypes.c_uint32),
        ("clockid", ctypes.c_int32),
        ("sample_regs_intr", ctypes.c_uint64),
        ("aux_watermark", ctypes.c_uint32),
        ("sample_max_stack", ctypes.c_uint16),
        ("reserved", ctypes.c_uint16),
    ]


class Unavailable(Exception):
    """The kernel refused the events; the message says why."""


def _open(tid: int, period_ns: int = PERIOD_NS) -> int:
    import platform

    number = _NR_PERF_EVENT_OPEN.get(platform.machine())
    if number is None:
        raise Unavailable(f"no perf_event_open number known for {platform.machine()}")
    attr = _Attr(type=_PERF_TYPE_SOFTWARE, size=ctypes.sizeof(_Attr), config=_SW_TASK_CLOCK)
    attr.sample_period = period_ns
    attr.sample_type = _SAMPLE_IP | _SAMPLE_TID
    attr.flags = _DISABLED | _EXCLUDE_KERNEL | _EXCLUDE_HV  # a per-thread event with a ring: no inherit
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    fd = int(libc.syscall(ctypes.c_long(number), ctypes.byref(attr), tid, -1, -1, ctypes.c_ulong(0)))
    if fd < 0:
        code = ctypes.get_errno()
        raise Unavailable(f"perf_event_open: {os.strerror(code)}")
    return fd


class Sampler:
    """Samples the threads of `pids` (and, after `follow`, the threads they started since) while inside
    `with`, every `period_ns` of a thread's run time."""

    def __init__(self, pids: list[int], period_ns: int = PERIOD_NS) -> None:
        self.events: list[tuple[int, mmap.mmap]] = []
        self.page = mmap.PAGESIZE
        self.pids, self.period_ns = pids, period_ns
        self.tids: set[int] = set()
        try:
            self.follow()
        except (Unavailable, OSError) as exc:
            self.close()
            raise Unavailable(str(exc)) from None

    def follow(self, refused: set[int] | None = None) -> None:
        """Open an event for every thread of the pids that has none yet (a pool started by a call). A
        thread whose event is refused raises Unavailable, or with `refused` is added to it and not tried
        again."""
        for pid in self.pids:
            try:
                tids = sorted(int(t) for t in os.listdir(f"/proc/{pid}/task"))
            except FileNotFoundError:  # gone: its samples so far still count
                continue
            for tid in tids:
                if tid in self.tids or (refused is not None and tid in refused):
                    continue
                try:
                    self.events.append(self._event(tid))
                except (Unavailable, OSError):
                    if refused is None:
                        raise
                    refused.add(tid)
                    continue
                self.tids.add(tid)

    def _event(self, tid: int) -> tuple[int, mmap.mmap]:
        fd = _open(tid, self.period_ns)
        try:
            return fd, mmap.mmap(
                fd, (1 + _PAGES) * self.page, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE
            )
        except OSError:
            os.close(fd)
            raise

    def __enter__(self) -> Sampler:
        import fcntl

        for fd, _ in self.events:
            fcntl.ioctl(fd, _IOC_ENABLE, 0)
        return self

    def __exit__(self, *exc: object) -> None:
        import fcntl

        for fd, _ in self.events:
            fcntl.ioctl(fd, _IOC_DISABLE, 0)

    def instructions(self, drain: bool = False) -> list[tuple[int, int]]:
        """(pid, instruction address) of every sample taken (since the last drain); with `drain`, the rings
        are emptied, so that a ring's room (about 2,700 samples) is per call of this rather than in all."""
        found: list[tuple[int, int]] = []
        size = _PAGES * self.page
        for _, ring in self.events:
            head = struct.unpack_from("<Q", ring, 1024)[0]
            tail = struct.unpack_from("<Q", ring, 1032)[0]
            data = bytes(ring[self.page : self.page + size])
            pos = tail
            while pos + 8 <= head:
                kind, _, length = struct.unpack_from("<IHH", _wrapped(data, pos % size, 8))
                if length < 8:
                    break
                if kind == _RECORD_SAMPLE and length >= 24:
                    ip, pid, _tid = struct.unpack_from("<QII", _wrapped(data, (pos + 8) % size, 16))
                    found.append((pid, ip))
                pos += length
            if drain:
                struct.pack_into("<Q", ring, 1032, head)
        return found

    def close(self) -> None:
        for fd, ring in self.events:
            ring.close()
            os.close(fd)
        self.events = []


def _wrapped(data: bytes, start: int, n: int) -> bytes:
    end = start + n
    return data[start:end] if end <= len(data) else data[start:] + data[: end - len(data)]


def mappings(pid: int) -> list[tuple[int, int, int, str]]:
    """The file-backed executable mappings of `pid`: (start, end, file offset, path)."""
    found: list[tuple[int, int, int, str]] = []
    try:
        lines = Path(f"/proc/{pid}/maps").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        parts = line.split(maxsplit=5)
        if len(parts) == 6 and "x" in parts[1] and parts[5].startswith("/"):
            start, end = (int(x, 16) for x in parts[0].split("-"))
            found.append((start, end, int(parts[2], 16), parts[5]))
    return found


# What an extension module carries that is not its author's code: the bindings pybind11 generates around
# every function, and PyTorch's and its standard library's templates instantiated there
GLUE = re.compile(
    r"^(_ZN[KS]*\d*(pybind11|c10|at|torch|std|__gnu_cxx)|_ZNK?St|PyInit_|_GLOBAL__|_init|_fini|__)"
)


_SHT_SYMTAB, _SHT_DYNSYM, _SHF_EXECINSTR = 2, 11, 0x4


@functools.lru_cache(maxsize=64)
def symbols(path: str) -> tuple[tuple[int, int, str], ...]:
    """The defined code symbols of a module file: (address, size, name), by address, read from its ELF
    symbol tables (what `nm --defined-only --print-size` sizes as T, t, W or w: symbols in executable
    sections); () where the file is no 64-bit little-endian ELF or cannot be read. Read here rather than
    by `nm`: a process start per verdict cost more than the sampling it serves."""
    try:
        data = Path(path).read_bytes()
    except OSError:
        return ()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:  # ELFCLASS64, little-endian
        return ()
    try:
        return _elf_symbols(data)
    except (struct.error, IndexError, ValueError):  # a truncated or malformed file: nothing to attribute
        return ()


def _elf_symbols(data: bytes) -> tuple[tuple[int, int, str], ...]:
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    executable = {i for i, sec in enumerate(sections) if sec[2] & _SHF_EXECINSTR}
    found = set()
    for sec in sections:
        if sec[1] not in (_SHT_SYMTAB, _SHT_DYNSYM):
            continue
        offset, size, entsize = sec[4], sec[5], sec[9] or 24
        strings = sections[sec[6]][4]
        for k in range(offset, offset + size - entsize + 1, entsize):
            name_at, _info, _other, shndx, value, length = struct.unpack_from("<IBBHQQ", data, k)
            if shndx in executable and name_at and length:  # as nm sizes them: a label has none
                end = data.index(b"\0", strings + name_at)
                found.add((value, length, data[strings + name_at : end].decode(errors="replace")))
    return tuple(sorted(found))


def _glue(path: str, ip: int, start: int, offset: int) -> bool:
    """Whether the instruction at `ip` (in the mapping of `path` at `start`, file offset `offset`) lies in
    binding or template code rather than the candidate's own functions."""
    address = ip - start + offset  # as the file's symbols name it (its code's addresses are its offsets)
    table = symbols(path)
    lo, hi = 0, len(table)
    while lo < hi:
        mid = (lo + hi) // 2
        if table[mid][0] <= address:
            lo = mid + 1
        else:
            hi = mid
    if lo == 0:
        return False
    begin, size, name = table[lo - 1]
    return address < begin + max(size, 1) and bool(GLUE.match(name))


# PyTorch's computing libraries (not its Python bindings, which wrap every call alike) and their kin
LIBRARIES = re.compile(
    r"lib(torch_cpu|torch|c10|gomp|omp|iomp5|mkl[^/]*|openblas|blas|lapack|sleef|dnnl)[.-][^/]*$"
)


def share(
    samples: list[tuple[int, int]],
    pid_maps: dict[int, list[tuple[int, int, int, str]]],
    ours: Callable[[str], bool],
) -> tuple[float | None, int]:
    """Of the samples in the candidate's own functions (in a file `ours` accepts, not its GLUE) or in
    LIBRARIES, the share in the candidate's (None when there are none of either), and their number."""
    mine = theirs = 0
    ordered = {pid: sorted(maps) for pid, maps in pid_maps.items()}
    index = {pid: (maps, [m[0] for m in maps]) for pid, maps in ordered.items()}
    for pid, ip in samples:
        maps, starts = index.get(pid, ([], []))
        at = bisect.bisect_right(starts, ip) - 1  # the mapping that starts last at or below ip
        if at < 0:
            continue
        start, end, offset, path = maps[at]
        if ip < end:
            if ours(path):
                mine += not _glue(path, ip, start, offset)
            elif LIBRARIES.search(path):
                theirs += 1
    return (mine / (mine + theirs) if mine + theirs else None), mine + theirs


class Watch:
    """Whose code a loop's calls ran, sampled from outside while inside `with` (entered around a batch's Run
    command, referee/timing.py): threads started since the last batch are followed and the rings drained
    after each batch, a sample every `period_ns` of a thread's run time. `ours` tells the candidate's
    files; `enough` once `wanted` samples fall in its code or PyTorch's; `wanted_s`: the seconds of calls
    that takes, judged by `counted`, the fraction of samples that counted when its share was taken.

    `every`: the loop runs every timed batch under it (and keeps their times), so a runner cannot tell a
    sampled batch from another by the slowdown sampling causes: none is unsampled. `keep` False samples and
    keeps nothing (the reference's loop on the CPU: the same slowdown as the candidate's, nothing judged).
    At most MAX_KEPT samples are kept: past it, every other one is let go (the share does not move)."""

    MAX_KEPT = 20_000

    def __init__(
        self, pids: list[int], period_ns: int, ours: Callable[[str], bool], wanted: int, counted: float,
        every: bool = False, keep: bool = True,
    ) -> None:  # fmt: skip
        self.sampler = Sampler(pids, period_ns)
        self.ours, self.wanted, self.every, self.keep = ours, wanted, every, keep
        self.wanted_s = wanted * period_ns / 1e9 / max(counted, 0.05) * 1.5
        self.samples: list[tuple[int, int]] = []
        self.unfollowed: set[int] = set()  # threads whose events were refused: said in the verdict

    def __enter__(self) -> Watch:
        self.sampler.follow(self.unfollowed)
        self.sampler.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.sampler.__exit__()
        drained = self.sampler.instructions(drain=True)  # drained whether kept or not: the rings' room
        if self.keep:
            self.samples += drained
            if len(self.samples) > self.MAX_KEPT:
                self.samples = self.samples[::2]

    def share(self) -> tuple[float | None, int]:
        """The share (and its count) over every sample taken (`share`, with the runner's maps as they are
        now)."""
        maps = {pid: mappings(pid) for pid in {pid for pid, _ in self.samples}}
        return share(self.samples, maps, self.ours)

    def enough(self) -> bool:
        return not self.keep or (len(self.samples) >= self.wanted and self.share()[1] >= self.wanted)

    def close(self) -> None:
        self.sampler.close()
