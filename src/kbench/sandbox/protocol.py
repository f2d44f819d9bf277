"""The files a worker job exchanges with the host: `job.json` in, `result.json` + tensor files out.

The result is signed with HMAC-SHA256 under a per-job key the host writes to the worker's stdin, or for
a forked worker into a FIFO in the job folder that the worker reads and removes first thing (never to a
file); the signature covers the JSON body, which lists the SHA-256 of every tensor file. A candidate
that writes its own `result.json` and exits does not know the key, so the host reports `result-forged`.
Tensor files are read with `torch.load(weights_only=True)`, which unpickles tensors only.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

JOB_FILE = "job.json"
RESULT_FILE = "result.json"
LOG_FILE = "log.txt"
KEY_BYTES = 32
KEY_FIFO_ENV = "KBENCH_KEY_FIFO"  # set for workers forked by the starter (sandbox/starter.py)


def read_key() -> bytes:
    """The job's HMAC key: from the FIFO the host named (forked workers), else from stdin (spawned)."""
    import os
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


class ProblemSpec(BaseModel):
    source: str
    level: int
    number: int
    name: str
    code: str
    path: str | None = None


class JobSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: str  # candidate | reference | build
    problem: ProblemSpec | None = None  # None for role build (the candidate is only imported)
    preset: str
    dtype: str
    device: str
    backend: str = ""
    candidate_file: str = ""  # path of the candidate source, for role candidate/build
    kernel_names: list[str] = Field(default_factory=list)  # names the host read from the source text
    init_seed: int = 42
    seeds: list[int] = Field(default_factory=list)
    timing_seeds: list[int] = Field(default_factory=list)
    sample_calls: list[int] = Field(default_factory=list)  # timed call indices whose outputs come back
    timing: dict[str, Any] = Field(default_factory=dict)  # TimingSettings fields
    measure: bool = True
    baselines: list[str] = Field(default_factory=list)  # reference only: eager, compile, ...
    memory_limit_gb: float = 0.0
    cache_dir: str = ""


class TensorFile(BaseModel):
    name: str
    sha256: str
    device: str = ""


class WorkerResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    status: str = "ok"  # a types.Status value, decided by the worker for its own stage
    rule: str = ""
    message: str = ""
    outputs: dict[str, list[TensorFile]] = Field(default_factory=dict)  # seed -> outputs
    input_checksums: dict[str, list[str]] = Field(default_factory=dict)  # seed -> per input
    samples: list[tuple[int, int, list[TensorFile]]] = Field(default_factory=list)  # (call, set, outs)
    timing: dict[str, Any] | None = None
    timings: dict[str, dict[str, Any]] = Field(default_factory=dict)  # reference: mode -> stats
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
    phases: dict[str, float] = Field(default_factory=dict)  # seconds per worker phase (harness speed)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def sign(body: str, key: bytes) -> str:
    return hmac.new(key, body.encode(), hashlib.sha256).hexdigest()


def write_result(jobdir: Path, result: WorkerResult, key: bytes) -> None:
    body = result.model_dump_json()
    tmp = jobdir / (RESULT_FILE + ".tmp")
    tmp.write_text(json.dumps({"body": body, "mac": sign(body, key)}))
    tmp.replace(jobdir / RESULT_FILE)


class ForgedResult(Exception):
    """The result file exists but is malformed or its signature/file hashes do not verify."""


def read_result(jobdir: Path, key: bytes) -> WorkerResult | None:
    """The verified result, None when the worker wrote none, ForgedResult when it does not verify."""
    path = jobdir / RESULT_FILE
    if not path.exists():
        return None
    try:
        wrapper = json.loads(path.read_text())
        body, mac = wrapper["body"], wrapper["mac"]
        if not isinstance(body, str) or not hmac.compare_digest(sign(body, key), str(mac)):
            raise ForgedResult("signature does not verify")
        result = WorkerResult.model_validate_json(body)
    except (OSError, ValueError, KeyError, TypeError, ValidationError) as exc:
        raise ForgedResult(f"malformed result file: {type(exc).__name__}") from None
    for files in [*result.outputs.values(), *(s[2] for s in result.samples)]:
        for f in files:
            target = jobdir / f.name
            if "/" in f.name or not target.exists() or sha256_file(target) != f.sha256:
                raise ForgedResult(f"tensor file {f.name} missing or altered")
    return result


def save_tensors(jobdir: Path, tag: str, values: list[Any]) -> list[TensorFile]:
    """Save CPU copies of `values` (plain tensors) as `TAG_i.pt`; returns their names and hashes."""
    import torch

    files = []
    for i, value in enumerate(values):
        name = f"{tag}_{i}.pt"
        torch.save(value.detach().to("cpu").clone(), jobdir / name)
        files.append(TensorFile(name=name, sha256=sha256_file(jobdir / name), device=str(value.device)))
    return files


def stash(values: list[Any]) -> list[Any]:
    """Copies of `values` (plain tensors) that later calls cannot change, for `save_tensors` to write later.

    A GPU tensor is copied on its device (microseconds, asynchronous) while the copy takes at most a
    quarter of the device's free memory, so the candidate's next calls keep their headroom; else to the
    CPU. Anything else is kept as it is (`save_tensors` rejects it as before).
    """
    import torch

    out = []
    for value in values:
        if not isinstance(value, torch.Tensor):
            out.append(value)
            continue
        value = value.detach()
        if value.device.type == "cuda":
            free, _ = torch.cuda.mem_get_info(value.device)
            if value.numel() * value.element_size() <= free // 4:
                out.append(value.clone())
                continue
        out.append(value.to("cpu", copy=True))
    return out


def load_tensors(jobdir: Path, files: list[TensorFile]) -> list[Any]:
    import torch

    return [torch.load(jobdir / f.name, map_location="cpu", weights_only=True) for f in files]
