"""The files a worker job exchanges with the host: `job.json` in, `result.json` + tensor files out.

The result is signed with HMAC-SHA256 under a per-job key the host writes to the worker's stdin, or for
a forked worker into a FIFO in the job folder that the worker reads and removes first thing (never to a
file); the signature covers the JSON body, which lists the digest of every tensor file. A candidate
that writes its own `result.json` and exits does not know the key, so the host reports `result-forged`.
Tensor files are raw bytes (`.bin`; dtype and shape in the signed body), written in one pass and mapped
by the host, never unpickled (sandbox/tensorfiles.py); their digest is a BLAKE3 of the BLAKE3s of their
64 MiB chunks (a 1 GiB output cost ~2 s to `torch.save` and ~0.7 s per SHA-256 pass on each side).

On a GPU, `receive.json` (sandbox/offer.py, host to candidate worker) offers device buffers for the
correctness outputs, and the result lists an output copied into one as `received`, without a file
(evaluate/device_outputs.py).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from pathlib import Path
from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, field_validator

from kbench.files import write_atomic
from kbench.sandbox.procs import KEY_FIFO_ENV
from kbench.types import JobRole, Problem, Status, TimingSettings, TimingStats, timing_record

JOB_FILE = "job.json"
RESULT_FILE = "result.json"
LOG_FILE = "log.txt"
PHASE_FILE = "phase"  # the phase a worker is in, for the host's per-phase budgets (sandbox/host.py)
COUNT_FILE = "count.json"  # a counts worker's request (worker/counts.py, evaluate/floor.py)
KEY_BYTES = 32


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


def announce(jobdir: Path, phase: str) -> None:
    """Tell the host this worker entered `phase` (its budget starts now)."""
    write_atomic(jobdir / PHASE_FILE, phase)


def dtype_name(dtype: Any) -> str:
    """A torch dtype as the exchanged files name it: "float32"."""
    return str(dtype).removeprefix("torch.")


class CountRequest(BaseModel):
    """What the counts worker counts (worker/counts.py): the problem's FLOPs and bytes at a preset and
    dtype, kept in `folder` (analysis/roofline.disk_counts)."""

    model_config = ConfigDict(extra="forbid")

    problem: Problem
    preset: str
    dtype: str
    folder: str


class JobSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: JobRole
    problem: Problem | None = None  # None for role build (the candidate is only imported)
    preset: str
    dtype: str
    device: str
    backend: str = ""
    candidate_file: str = ""  # path of the candidate source, for role candidate/build
    kernel_names: list[str] = Field(default_factory=list)  # names the host read from the source text
    init_seed: int = 42
    seeds: list[int] = Field(default_factory=list)
    timing: TimingSettings = Field(default_factory=TimingSettings)
    measure: bool = True
    baselines: list[str] = Field(default_factory=list)  # reference only: eager, compile, ...
    memory_limit_gb: float = 0.0
    # the runner's walls (sandbox/isolate.Walls as a dict; None: none) and the cores it runs on
    walls: dict[str, Any] | None = None
    cores: list[int] = Field(default_factory=list)
    budgets: dict[str, float] = Field(default_factory=dict)  # seconds per phase, kept by the referee
    min_kernel_share: float = 0.0  # the share of a call's device time the candidate's own kernels must carry
    cache_dir: str = ""
    lease_wait_s: float = 600.0  # a GPU worker's longest wait for the device lease (sandbox/lease.py)
    compile_arch: str = (
        "sm_90"  # the GPU arch Triton kernels are compile-checked for (RunConfig.compile_arch)
    )
    confine: bool = True  # candidate and build workers confine themselves (RunConfig.confine)
    # on a GPU: wait for the host's offer (sandbox/offer.py) and copy outputs into its buffers -- a candidate
    # its correctness outputs, the reference every output (before it gives up the lease)
    receive: bool = False
    offer_wait_s: float = 30.0  # reference: its longest wait for the host's offer (milliseconds, normally)
    # reference: seeds whose outputs it writes into `cache_folder` (the fixed seeds, on a cache miss), delivered
    # to the host's buffers or not; a temporary folder beside the cache entry, which the host renames
    cache_seeds: list[int] = Field(default_factory=list)
    cache_folder: str = ""
    # candidate started beside the reference: time only once the host has read the reference's outputs
    # (sandbox/offer.py SETTLED_FILE), so that read and the reference's write do not fall in the loop. Only
    # with `receive`: waiting for its buffers, the worker takes the lease after the reference's GPU phase;
    # one holding the lease while it waits would keep the reference from finishing.
    settle: bool = False


class TensorFile(BaseModel):
    name: str
    # raw files: the chunk digest (tensorfiles.digest, BLAKE3); .pt files: SHA-256 of the file. Entries
    # kept by an older kbench (the reference cache) name it `sha256`.
    digest: str = Field(validation_alias=AliasChoices("digest", "sha256"))
    device: str = ""
    dtype: str = ""  # e.g. "float32"; empty: a .pt file
    shape: list[int] = Field(default_factory=list)
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
    timing: TimingStats | None = None
    timings: dict[str, TimingStats] = Field(default_factory=dict)  # reference: mode -> stats
    kernels_ran: list[str] = Field(default_factory=list)
    kernel_share: float | None = None
    build_seconds: float = 0.0
    build_cache_hit: bool = False
    build_recipe: str = ""  # cache | light-headers[+pch] | pch | standard [(fast recipe failed)]
    build_log: str = ""
    warnings: list[str] = Field(default_factory=list)
    # Cheats the referee saw that the host judges once the correctness outputs are known to be right (a
    # wrong candidate is a `mismatch` first): (rule, message), in the order seen -- a checked timed call
    # unlike the reference, more CPU than its cores, a process left running
    flagged: list[tuple[str, str]] = Field(default_factory=list)
    phases: dict[str, float] = Field(default_factory=dict)  # seconds per worker phase (harness speed)
    # candidate runner: "landlock abi N+reads, namespaces user+pid+..." or "none: WHY" (sandbox/confine.py,
    # sandbox/isolate.py)
    confinement: str = ""

    @field_validator("timing", mode="before")
    @classmethod
    def _timing(cls, value: Any) -> Any:  # a reference cache entry's timings stored with `extra`
        return timing_record(value)

    @field_validator("timings", mode="before")
    @classmethod
    def _timings(cls, value: Any) -> Any:
        return {k: timing_record(v) for k, v in value.items()} if isinstance(value, dict) else value


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
    from kbench.sandbox.tensorfiles import file_digest  # it imports this module

    for f in outputs if files else []:
        target = jobdir / f.name
        if "/" in f.name or not target.is_file() or file_digest(f, target) != f.digest:
            raise ForgedResult(f"tensor file {f.name} missing or altered")
    return result
