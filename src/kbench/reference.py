"""The reference worker (`python -m kbench.reference JOBDIR`) and its disk cache (host side).

The worker runs trusted code only: it builds `Model` under the fixed init seed (KernelBench's semantics,
problems.build_model), casts it to the problem dtype, writes the output and input checksums for each
seed, and times eager and torch.compile (`default`, plus `max-autotune-no-cudagraphs` on a GPU) with the
same `time_callable` the candidate gets.

The host caches the fixed seeds' outputs and the timings (written in the background) under
`cache_dir/reference/KEY`, KEY = problem code hash + preset + dtype + torch version + device + seeds +
timing settings + baselines. The per-run secret seeds are never cached: each evaluation starts one
reference job for them (and, on a cache miss, for everything).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import sys
import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kbench.sandbox import procs
from kbench.sandbox.protocol import (
    JOB_FILE,
    JobSpec,
    WorkerResult,
    announce,
    read_key,
    save_tensors,
    write_result,
)

COMPILE_MODES = {"eager": None, "compile": "default", "compile-max-autotune": "max-autotune-no-cudagraphs"}
CACHE_FILE = "reference.json"


@dataclass
class ReferenceData:
    outputs: dict[int, list[Any]] = field(default_factory=dict)  # seed -> CPU tensors
    checksums: dict[int, list[str]] = field(default_factory=dict)
    timings: dict[str, dict[str, Any]] = field(default_factory=dict)  # mode -> TimingStats fields
    cache_hit: bool = False
    shared: bool = False  # reused from an earlier evaluation of this run (reference_pool)
    phases: dict[str, float] = field(default_factory=dict)  # the reference worker's, plus its wall time


def _timed_modes(
    spec: JobSpec, model: Any, loaded: Any, phases: dict[str, float]
) -> dict[str, dict[str, Any]]:
    import torch

    from kbench.correctness import make_inputs
    from kbench.timing import TimingSettings, time_callable

    device = torch.device(spec.device)
    sets = [make_inputs(loaded.get_inputs, s, device, spec.dtype) for s in spec.timing_seeds]
    out = {}
    for mode in spec.baselines:
        if mode not in COMPILE_MODES:
            raise ValueError(f"unknown baseline {mode!r}; known: {', '.join(COMPILE_MODES)}")
        compile_mode = COMPILE_MODES[mode]
        fn = model if compile_mode is None else torch.compile(model, mode=compile_mode)
        t0 = time.perf_counter()
        stats = time_callable(fn, sets, TimingSettings(**spec.timing), device).stats
        out[mode] = asdict(stats)
        phases[f"time_{mode}"] = round(time.perf_counter() - t0, 3)  # incl. torch.compile's own compile
    return out


def run_reference(spec: JobSpec, jobdir: Path) -> WorkerResult:
    import torch

    from kbench import timing
    from kbench.correctness import TORCH_DTYPES, checksum, flatten_outputs, ieee_numerics, make_inputs
    from kbench.problems import build_model, load
    from kbench.sandbox import lease
    from kbench.types import Problem

    ieee_numerics()
    torch.set_grad_enabled(False)
    timing.pin_threads(timing.TimingSettings(**spec.timing))
    device = torch.device(spec.device)
    assert spec.problem is not None
    result = WorkerResult()
    # Trusted CPU work first, while another job may hold the GPU: loading the problem and building its
    # model on the CPU (as before, under the init seed) need no device.
    t0 = time.perf_counter()
    announce(jobdir, "load")
    loaded = load(Problem(**spec.problem.model_dump()), spec.preset)
    model = build_model(loaded, spec.init_seed)
    result.phases["construct"] = round(time.perf_counter() - t0, 3)
    leased = lease.required(spec.role, spec.device)
    if leased:  # before any GPU work (sandbox/lease.py)
        announce(jobdir, "lease")
        try:
            waited = lease.acquire(lease.device_id(spec.device), jobdir, spec.lease_wait_s, spec.role)
        except lease.LeaseTimeout as exc:
            result.error = str(exc)
            return result
        result.phases["lease"] = round(waited, 3)
    announce(jobdir, "reference")
    model = model.to(device)
    if spec.dtype != "fp32":
        model = model.to(TORCH_DTYPES[spec.dtype])
    t0 = time.perf_counter()
    outputs: dict[str, tuple[list[str], list[Any]]] = {}
    keep = _Keeper(device)
    for seed in spec.seeds:
        inputs = make_inputs(loaded.get_inputs, seed, device, spec.dtype)
        result.input_checksums[str(seed)] = checksum(inputs)
        values = flatten_outputs(model(*inputs))
        outputs[str(seed)] = ([str(getattr(v, "device", "")) for v in values], [keep(v) for v in values])
    result.phases["outputs"] = round(time.perf_counter() - t0, 3)
    if spec.measure:
        result.timings = _timed_modes(spec, model, loaded, result.phases)
    if leased:
        # The GPU work is done and the code is trusted: the next job may start its GPU phase while this
        # one writes its files and exits (a candidate worker keeps its lease until it dies). Outputs kept
        # on the GPU are copied out meanwhile: copy engines and a few GB/s of memory traffic, no SM time.
        torch.cuda.synchronize(device)
        lease.release()
    t0 = time.perf_counter()
    for tag, (devices, values) in outputs.items():
        files = save_tensors(jobdir, f"out_{tag}", values)
        result.outputs[tag] = [
            f.model_copy(update={"device": d}) for f, d in zip(files, devices, strict=True)
        ]
    result.phases["write"] = round(time.perf_counter() - t0, 3)
    return result


class _Keeper:
    """Where each reference output waits to be written: on its GPU while all of them take at most a quarter
    of the memory free there (written later through pinned buffers, save_tensors), else copied to the CPU
    now. The pageable copies cost more than the forward passes: 5.2 s for 7 outputs of 1 GiB on an H200
    host, against ~1 s to compute them."""

    def __init__(self, device: Any) -> None:
        import torch

        self.budget = torch.cuda.mem_get_info(device)[0] // 4 if device.type == "cuda" else 0

    def __call__(self, value: Any) -> Any:
        import torch

        if not isinstance(value, torch.Tensor):
            return value  # save_tensors rejects it
        nbytes = value.numel() * value.element_size()
        if value.device.type == "cuda" and nbytes <= self.budget:
            self.budget -= nbytes
            return value.detach()
        return value.detach().to("cpu")


def main(argv: list[str]) -> int:
    procs.bind_to_parent()  # first: a worker must never outlive the kbench process that started it
    jobdir = Path(argv[1])
    key = read_key()
    spec = JobSpec.model_validate_json((jobdir / JOB_FILE).read_text())
    write_result(jobdir, run_reference(spec, jobdir), key)
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown: after torch.compile it waits ~3 s (2 loaded cores) for Inductor's
    # compile workers and atexit hooks; the result is already written and signed.
    os._exit(0)


NUMERICS = "ieee-fp32-v2"  # ieee_numerics' settings and where make_inputs generates; in the cache key

# ---- host side: cache ----------------------------------------------------------------------------


def cache_key(spec: JobSpec, torch_version: str, device_name: str) -> str:
    assert spec.problem is not None
    parts = {
        "code": hashlib.sha256(spec.problem.code.encode()).hexdigest(),
        "preset": spec.preset,
        "dtype": spec.dtype,
        "torch": torch_version,
        "device": device_name,
        "seeds": spec.seeds,
        "timing_seeds": spec.timing_seeds,
        "timing": spec.timing,
        "baselines": spec.baselines,
        "init_seed": spec.init_seed,
        "measure": spec.measure,
        "numerics": NUMERICS,
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:24]


# Cache writes run on one background thread: copying a problem's fixed outputs (up to a few GiB) from the
# job folder to the cache's disk held up the evaluation that ran the reference, and through it a GPU lane.
# The source files are opened before `write_cache` returns, so the job folder may go at once; a read of
# the same folder in this process waits for its write; the interpreter waits for pending writes at exit.
_writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="reference-cache")
_pending: dict[Path, Future[None]] = {}
_pending_lock = threading.Lock()
log = logging.getLogger(__name__)


def read_cache(folder: Path) -> WorkerResult | None:
    wait_for_cache(folder)
    path = folder / CACHE_FILE
    try:
        return WorkerResult.model_validate_json(path.read_text())
    except (OSError, ValueError):  # absent, or written by another kbench version: computed again
        return None


def wait_for_cache(folder: Path | None = None) -> None:
    """Until this process's pending cache write of `folder` (of every folder: None) is done."""
    with _pending_lock:
        futures = list(_pending.values()) if folder is None else [_pending.get(folder)]
    for fut in futures:
        if fut is not None:
            wait([fut])


def write_cache(folder: Path, jobdir: Path, result: WorkerResult, seeds: list[int]) -> None:
    """Copy the fixed seeds' files and the timings to `folder` atomically (temp folder + rename), in the
    background. A failed write is logged and leaves no cache entry: the next run computes it again."""
    kept = WorkerResult(timings=result.timings)
    sources = []
    try:
        for seed in map(str, seeds):
            kept.outputs[seed] = result.outputs[seed]
            kept.input_checksums[seed] = result.input_checksums[seed]
            sources += [(f.name, (jobdir / f.name).open("rb")) for f in result.outputs[seed]]
    except OSError as exc:
        _close(sources)
        log.warning("reference cache %s not written: %s", folder, exc)
        return
    with _pending_lock:
        if folder in _pending:  # this process is already writing this entry
            _close(sources)
            return
        fut = _writer.submit(_write_files, folder, sources, kept)
        _pending[folder] = fut
    fut.add_done_callback(lambda _: _done(folder))


def _done(folder: Path) -> None:
    with _pending_lock:
        _pending.pop(folder, None)


def _write_files(folder: Path, sources: list[tuple[str, Any]], kept: WorkerResult) -> None:
    tmp: Path | None = None
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=folder.parent))
        for name, fh in sources:
            with (tmp / name).open("wb") as out:
                shutil.copyfileobj(fh, out, 16 << 20)
        (tmp / CACHE_FILE).write_text(kept.model_dump_json())
        try:
            os.rename(tmp, folder)
        except OSError:  # a concurrent run cached the same key first
            shutil.rmtree(tmp, ignore_errors=True)
    except Exception as exc:  # the cache is an optimisation: a full disk must not lose the verdict
        log.warning("reference cache %s not written: %s", folder, exc)
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    finally:
        _close(sources)


def _close(sources: list[tuple[str, Any]]) -> None:
    for _, fh in sources:
        fh.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
