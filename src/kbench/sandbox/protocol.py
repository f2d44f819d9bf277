"""The files a worker job exchanges with the host: `job.json` in, `result.json` + tensor files out.

The result is signed with HMAC-SHA256 under a per-job key the host writes to the worker's stdin, or for
a forked worker into a FIFO in the job folder that the worker reads and removes first thing (never to a
file); the signature covers the JSON body, which lists the digest of every tensor file. A candidate
that writes its own `result.json` and exits does not know the key, so the host reports `result-forged`.
Tensor files are raw bytes (`.bin`; dtype and shape in the signed body), written in one pass and mapped
by the host, never unpickled; their digest (`digest`) is a BLAKE3 of the BLAKE3s of their 64 MiB chunks,
hashed on a quarter of the cores (`HASH_THREADS`; a 1 GiB output cost ~2 s to `torch.save` and ~0.7 s per SHA-256 pass on each side;
`TensorFile.sha256` keeps its old name). Files listed without a dtype (reference caches of earlier
versions) are `.pt` files read with `torch.load(weights_only=True)`, which unpickles tensors only.

On a GPU, `receive.json` (sandbox/offer.py, host to candidate worker) offers device buffers for the
correctness outputs, and the result lists an output copied into one as `received`, without a file
(evaluate/device_outputs.py).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import blake3
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kbench.types import Problem, Status, TimingSettings, TimingStats

JOB_FILE = "job.json"
RESULT_FILE = "result.json"
LOG_FILE = "log.txt"
PHASE_FILE = "phase"  # the phase a worker is in, for the host's per-phase budgets (sandbox/host.py)
KEY_BYTES = 32
KEY_FIFO_ENV = "KBENCH_KEY_FIFO"  # set for workers forked by the starter (sandbox/starter.py)
SAMPLE_ELEMENTS = 1 << 20  # random elements kept of a sampled output above JobSpec.sample_whole_bytes


def read_key() -> bytes:
    """The job's HMAC key: from the FIFO the host named (forked workers), else from stdin (spawned)."""
    import sys

    fifo = os.environ.pop(KEY_FIFO_ENV, None)
    if fifo is None:
        key = sys.stdin.buffer.read(KEY_BYTES)
        sys.stdin.close()
        return key
    with open(fifo, "rb") as f:
        key = f.read(KEY_BYTES)
    try:
        os.unlink(fifo)
    except OSError:
        pass
    return key


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` so that a reader sees the old file or the whole new one, never a part."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def announce(jobdir: Path, phase: str) -> None:
    """Tell the host this worker entered `phase` (its budget starts now)."""
    write_atomic(jobdir / PHASE_FILE, phase)


def dtype_name(dtype: Any) -> str:
    """A torch dtype as the exchanged files name it: "float32"."""
    return str(dtype).removeprefix("torch.")


class JobSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: str  # candidate | reference | build
    problem: Problem | None = None  # None for role build (the candidate is only imported)
    preset: str
    dtype: str
    device: str
    backend: str = ""
    candidate_file: str = ""  # path of the candidate source, for role candidate/build
    kernel_names: list[str] = Field(default_factory=list)  # names the host read from the source text
    init_seed: int = 42
    seeds: list[int] = Field(default_factory=list)
    timing_seeds: list[int] = Field(default_factory=list)
    sample_count: int = 0  # timed calls whose outputs come back, drawn over the whole loop (timing.Reservoir)
    sample_whole_bytes: int = 4 << 20  # a sampled output above this comes back at random elements only
    timing: TimingSettings = Field(default_factory=TimingSettings)
    measure: bool = True
    baselines: list[str] = Field(default_factory=list)  # reference only: eager, compile, ...
    memory_limit_gb: float = 0.0
    cache_dir: str = ""
    lease_wait_s: float = 600.0  # a GPU worker's longest wait for the device lease (sandbox/lease.py)
    compile_arch: str = (
        "sm_90"  # the GPU arch Triton kernels are compile-checked for (RunConfig.compile_arch)
    )
    confine: bool = True  # candidate and build workers confine themselves (RunConfig.confine)
    # candidate on a GPU: wait for the host's offer (sandbox/offer.py), copy the correctness outputs into its buffers
    receive: bool = False
    # candidate started beside the reference: time only once the host has read the reference's outputs
    # (sandbox/offer.py SETTLED_FILE), so that read and the reference's write do not fall in the loop. Only
    # with `receive`: waiting for its buffers, the worker takes the lease after the reference's GPU phase;
    # one holding the lease while it waits would keep the reference from finishing.
    settle: bool = False


class TensorFile(BaseModel):
    name: str
    sha256: str  # raw files: the chunk digest (`digest`, BLAKE3); .pt files: SHA-256 of the file
    device: str = ""
    dtype: str = ""  # e.g. "float32"; empty: a .pt file
    shape: list[int] = Field(default_factory=list)
    # A sampled output kept at random elements only (`Subsample`): the flat positions (an int64 file) and
    # the whole output's shape. The values file then holds the elements at those positions.
    index: TensorFile | None = None
    whole_shape: list[int] | None = None
    # The output went into the host's device buffer for it (sandbox/offer.py), not into a file (no name, no digest):
    # the host compares the buffer it owns, whatever this entry says.
    received: bool = False


class WorkerResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    status: Status = Status.OK  # decided by the worker for its own stage
    error: str = ""  # kbench's own failure before the candidate ran (e.g. the GPU lease never came free)
    rule: str = ""
    message: str = ""
    outputs: dict[str, list[TensorFile]] = Field(default_factory=dict)  # seed -> outputs
    input_checksums: dict[str, list[str]] = Field(default_factory=dict)  # seed -> per input
    samples: list[tuple[int, int, list[TensorFile]]] = Field(default_factory=list)  # (call, set, outs)
    timing: TimingStats | None = None
    timings: dict[str, TimingStats] = Field(default_factory=dict)  # reference: mode -> stats
    times_ms: list[float] = Field(default_factory=list)  # per timed call, the timer's reading
    wall_ms: list[float] = Field(default_factory=list)
    overhead_ms: float = 0.0
    kernels_ran: list[str] = Field(default_factory=list)
    kernel_share: float | None = None
    build_seconds: float = 0.0
    build_cache_hit: bool = False
    build_recipe: str = ""  # cache | light-headers[+pch] | pch | standard [(fast recipe failed)]
    build_log: str = ""
    warnings: list[str] = Field(default_factory=list)
    # a timed call whose outputs disagreed with the other calls on the same inputs (worker/consistency.py); the
    # host judges it once the outputs are known to be correct (a wrong candidate is a mismatch first)
    inconsistent: str = ""
    phases: dict[str, float] = Field(default_factory=dict)  # seconds per worker phase (harness speed)
    confinement: str = ""  # candidate worker: "landlock abi N" or "none: WHY" (sandbox/confine.py)


DIGEST_CHUNK_BYTES = 64 << 20
# Cores one digest may use: a quarter of this process's. The host verifies a reference's files while the
# workers beside it run (a candidate's correctness, another lane's job): a hash on every core left them
# none.
HASH_THREADS = max(
    1, (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1) // 4
)


def _hash(data: Any, threads: int = HASH_THREADS) -> bytes:
    """BLAKE3 of a buffer, on up to `threads` threads for a large one: 4 GB/s per core where SHA-256 gave
    1.25, and a tensor file is hashed twice per verdict (the worker writes it, the host verifies it)."""
    return blake3.blake3(data, max_threads=threads if len(data) >= 1 << 22 else 1).digest()


def digest(data: Any, threads: int = HASH_THREADS) -> str:
    """The hash (`_hash`) of the concatenated hashes of `data`'s 64 MiB chunks (a buffer), chunks hashed on
    up to `threads` threads, one each (the hash releases the GIL on large buffers)."""
    from concurrent.futures import ThreadPoolExecutor

    view = memoryview(data).cast("B")
    chunks = [view[i : i + DIGEST_CHUNK_BYTES] for i in range(0, len(view), DIGEST_CHUNK_BYTES)] or [view]
    if len(chunks) == 1 or threads == 1:
        parts = [_hash(chunk, threads) for chunk in chunks]
    else:
        with ThreadPoolExecutor(max_workers=min(len(chunks), threads)) as pool:
            parts = list(pool.map(_hash, chunks, [1] * len(chunks)))
    return _chunk_digest(parts, len(view))


def _chunk_digest(parts: list[bytes], nbytes: int) -> str:
    """`digest` from its chunks' hashes (also what `_stream_to_file` returns)."""
    return blake3.blake3(b"".join(parts) + str(nbytes).encode()).hexdigest()


def digest_file(path: Path) -> str:
    import mmap

    with path.open("rb") as fh:
        if path.stat().st_size == 0:
            return digest(b"")
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            return digest(mm)  # its views into the map are gone when it returns: the map can close


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def sign(body: str, key: bytes) -> str:
    return hmac.new(key, body.encode(), hashlib.sha256).hexdigest()


def write_signed(path: Path, body: str, key: bytes) -> None:
    """`body` with its HMAC under the job's `key`, written atomically (read back by `read_signed`)."""
    write_atomic(path, json.dumps({"body": body, "mac": sign(body, key)}))


class ForgedResult(Exception):
    """The result file exists but is malformed or its signature/file hashes do not verify."""


def read_signed(path: Path, key: bytes) -> str:
    """The body of a `write_signed` file; ForgedResult when its signature does not verify (OSError,
    ValueError, KeyError or TypeError when it is missing or not such a file)."""
    wrapper = json.loads(path.read_text())
    body, mac = wrapper["body"], wrapper["mac"]
    if not isinstance(body, str) or not hmac.compare_digest(sign(body, key), str(mac)):
        raise ForgedResult("signature does not verify")
    return body


def write_result(jobdir: Path, result: WorkerResult, key: bytes) -> None:
    write_signed(jobdir / RESULT_FILE, result.model_dump_json(), key)


def read_result(jobdir: Path, key: bytes, files: bool = True) -> WorkerResult | None:
    """The verified result, None when the worker wrote none, ForgedResult when it does not verify.
    `files=False` leaves the tensor files to `load_verified`, which checks them as it reads them."""
    path = jobdir / RESULT_FILE
    if not path.exists():
        return None
    try:
        result = WorkerResult.model_validate_json(read_signed(path, key))
    except (OSError, ValueError, KeyError, TypeError, ValidationError) as exc:
        raise ForgedResult(f"malformed result file: {type(exc).__name__}") from None
    outputs = [f for listed in result.outputs.values() for f in listed if not f.received]  # received: in
    samples = [f for s in result.samples for f in s[2]]  # the host's own device buffer, nothing to verify
    for f in outputs + samples if files else []:
        for g in (f, f.index) if f.index is not None else (f,):
            target = jobdir / g.name
            if "/" in g.name or not target.is_file() or _file_digest(g, target) != g.sha256:
                raise ForgedResult(f"tensor file {g.name} missing or altered")
    return result


def _file_digest(f: TensorFile, path: Path) -> str:
    if not f.dtype:
        return sha256_file(path)
    _raw_layout(path, f)
    return digest_file(path)


def _raw_layout(path: Path, f: TensorFile) -> tuple[Any, int]:
    """The torch dtype and byte count a raw file's entry declares, checked against the file's size."""
    import math

    import torch

    dtype = getattr(torch, f.dtype, None)
    if not isinstance(dtype, torch.dtype) or any(d < 0 for d in f.shape):
        raise ForgedResult(f"tensor file {f.name}: bad dtype {f.dtype!r} or shape {f.shape}")
    nbytes = math.prod(f.shape) * dtype.itemsize
    if path.stat().st_size != nbytes:
        raise ForgedResult(f"tensor file {f.name}: {path.stat().st_size} bytes, expected {nbytes}")
    return dtype, nbytes


@dataclass
class Subsample:
    """Elements of one output at random flat positions, drawn after the call returned it."""

    values: Any
    index: Any
    shape: tuple[int, ...]
    device: str


def save_tensors(jobdir: Path, tag: str, values: list[Any], first: int = 0) -> list[TensorFile]:
    """Write `values` (plain tensors, or `Subsample`s) as raw `TAG_i.bin` files, i counting from `first`;
    returns their names, digests, dtypes, shapes (a subsample's positions go to `TAG_i.index.bin`)."""

    files = []
    for i, value in enumerate(values, start=first):
        if isinstance(value, Subsample):
            f = _save_one(jobdir, f"{tag}_{i}.bin", value.values, value.device)
            f.index = _save_one(jobdir, f"{tag}_{i}.index.bin", value.index, value.device)
            f.whole_shape = list(value.shape)
        else:
            f = _save_one(jobdir, f"{tag}_{i}.bin", value, str(value.device))
        files.append(f)
    return files


def _save_one(jobdir: Path, name: str, value: Any, device: str) -> TensorFile:
    import torch

    t = value.detach()
    sha = None
    if t.device.type == "cuda" and t.numel() * t.element_size() > DIGEST_CHUNK_BYTES:
        try:
            t = t.contiguous()
            sha = _stream_to_file(t.reshape(-1).view(torch.uint8), jobdir / name)
        except RuntimeError:  # out of device memory, or no pinned memory (torch errors): the copy below
            sha = None
    if sha is None:
        t = t.to("cpu").contiguous()
        data = t.reshape(-1).view(torch.uint8).numpy()
        with (jobdir / name).open("wb") as fh:
            fh.write(memoryview(data).cast("B"))
        sha = digest(data)
    return TensorFile(name=name, sha256=sha, device=device, dtype=dtype_name(t.dtype), shape=list(t.shape))


def _stream_to_file(flat: Any, path: Path) -> str:
    """Write a contiguous byte tensor to `path` and return its `digest`, 64 MiB at a time through two
    buffers (pinned for a GPU tensor): the copy of the next chunk runs while this one is written and
    hashed (in parallel). A 1 GiB GPU output otherwise took three passes on the host, each faulting in
    fresh pages: a pageable device-to-host copy, the write, the digest."""
    import contextlib
    from concurrent.futures import ThreadPoolExecutor

    import torch

    n = flat.numel()
    cuda = flat.device.type == "cuda"
    starts = list(range(0, n, DIGEST_CHUNK_BYTES))
    parts = []
    with (
        torch.cuda.device(flat.device) if cuda else contextlib.nullcontext(),
        ThreadPoolExecutor(max_workers=1) as pool,
        path.open("wb") as fh,
    ):
        bufs = [torch.empty(DIGEST_CHUNK_BYTES, dtype=torch.uint8, pin_memory=cuda) for _ in range(2)]
        done = [torch.cuda.Event() for _ in range(2)] if cuda else []

        def issue(i: int) -> None:
            s = starts[i]
            e = min(n, s + DIGEST_CHUNK_BYTES)
            bufs[i % 2][: e - s].copy_(flat[s:e], non_blocking=cuda)
            if cuda:
                done[i % 2].record()  # on the current stream of the tensor's device, after the copy

        for i in range(min(2, len(starts))):
            issue(i)
        for i, s in enumerate(starts):
            if cuda:
                done[i % 2].synchronize()
            size = min(n, s + DIGEST_CHUNK_BYTES) - s
            view = memoryview(bufs[i % 2].numpy()).cast("B")[:size]  # type: ignore[arg-type]
            hashed = pool.submit(_hash, view)
            fh.write(view)
            parts.append(hashed.result())
            if i + 2 < len(starts):
                issue(i + 2)  # this buffer is free again: written and hashed
    return _chunk_digest(parts, n)


def load_verified(jobdir: Path, files: list[TensorFile]) -> list[Any]:
    """CPU tensors of raw `files`, each read once into this process's own memory and checked against its
    signed digest there; ForgedResult when one does not verify. For the trusted reference's outputs: a
    mapped file is read as it is used, so a candidate running meanwhile could rewrite it after a check of
    the file itself; a private copy cannot change after its check."""
    from concurrent.futures import ThreadPoolExecutor

    for f in files:
        if "/" in f.name or not f.dtype or not (jobdir / f.name).is_file():
            raise ForgedResult(f"tensor file {f.name} missing or not a raw tensor file")
    if len(files) <= 1 or HASH_THREADS == 1:
        return [_read_verified(jobdir / f.name, f) for f in files]
    # Files at once: reading and hashing release the GIL, and a reference has 7 outputs per output name
    # (256 MiB each took the host 2 s one after the other on an H200 host, on a cold verdict's critical
    # path while the candidate had already finished); HASH_THREADS in all, each hashing on one.
    with ThreadPoolExecutor(max_workers=min(len(files), HASH_THREADS)) as pool:
        return list(pool.map(lambda f: _read_verified(jobdir / f.name, f, threads=1), files))


def _read_verified(path: Path, f: TensorFile, threads: int = HASH_THREADS) -> Any:
    import torch

    dtype, nbytes = _raw_layout(path, f)
    raw = torch.empty(nbytes, dtype=torch.uint8)
    with path.open("rb") as fh:
        got = fh.readinto(memoryview(raw.numpy()).cast("B")) if nbytes else 0  # type: ignore[arg-type]
    if got != nbytes or digest(raw.numpy() if nbytes else b"", threads) != f.sha256:
        raise ForgedResult(f"tensor file {f.name} missing or altered")
    return raw.view(dtype).reshape(f.shape) if nbytes else torch.empty(f.shape, dtype=dtype)


def load_tensors(jobdir: Path, files: list[TensorFile]) -> list[Any]:
    """CPU tensors of `files`: raw files mapped copy-on-write (pages read as they are used)."""
    return [_load_raw(jobdir / f.name, f) if f.dtype else _load_pt(jobdir / f.name) for f in files]


def _load_pt(path: Path) -> Any:
    import torch

    return torch.load(path, map_location="cpu", weights_only=True)


def _load_raw(path: Path, f: TensorFile) -> Any:
    import torch

    dtype, nbytes = _raw_layout(path, f)  # read_result checked it; cached references arrive here directly
    if nbytes == 0:
        return torch.empty(f.shape, dtype=dtype)
    raw = torch.from_file(str(path), shared=False, size=nbytes, dtype=torch.uint8)
    return raw.view(dtype).reshape(f.shape)
