"""The reference run's disk cache (host side).

The host caches the fixed seeds' outputs and the timings (written in the background) under
`cache_dir/reference/KEY`, KEY = problem code hash + preset + dtype + torch version + device + seeds +
timing settings + baselines. The per-run secret seeds are never cached: each evaluation starts one
reference job for them (and, on a cache miss, for everything). The reference worker itself is
worker/reference.py.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import shutil
import tempfile
import threading
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kbench.sandbox import procs
from kbench.sandbox.procs import ProcRef
from kbench.sandbox.protocol import ForgedResult, JobSpec, TensorFile, WorkerResult
from kbench.sandbox.tensorfiles import copy_verified
from kbench.types import TimingStats

CACHE_FILE = "reference.json"
NUMERICS = "ieee-fp32-v2"  # ieee_numerics' settings and where make_inputs generates; in the cache key


class DeviceCopies(dict[tuple[int, str], list[Any]]):
    """A reference's outputs mirrored on GPUs, by (seed, device); weakly referable, unlike a dict."""


@dataclass
class ReferenceData:
    outputs: dict[int, list[Any]] = field(default_factory=dict)  # seed -> CPU tensors
    checksums: dict[int, list[str]] = field(default_factory=dict)
    timings: dict[str, TimingStats] = field(default_factory=dict)  # by mode
    cache_hit: bool = False
    shared: bool = False  # reused from an earlier evaluation of this run (reference_pool)
    phases: dict[str, float] = field(default_factory=dict)  # the reference worker's, plus its wall time
    # (seed, device) -> the outputs copied to a GPU, for comparisons there (evaluate/device_outputs.py);
    # one object for this reference and its shared copies (reference_pool)
    device_outputs: DeviceCopies = field(default_factory=lambda: DeviceCopies())


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
        "timing": asdict(spec.timing),
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
_pending: dict[Path, Future[None]] = {}
_pending_lock = threading.Lock()
log = logging.getLogger(__name__)


@functools.cache
def _writer() -> ThreadPoolExecutor:
    """Started by the first cache write, not when the module is imported."""
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="reference-cache")


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
    background, each file checked against the worker's signed digest as it is copied: the host may not have
    read them (outputs it took on the device), and a candidate beside the reference could have rewritten
    them. A failed write or check is logged and leaves no cache entry: the next run computes it again."""
    kept = WorkerResult(timings=result.timings)
    sources = []
    try:
        for seed in map(str, seeds):
            # the cached entries are files: where an output also went into a device buffer, not any more
            kept.outputs[seed] = [f.model_copy(update={"received": False}) for f in result.outputs[seed]]
            kept.input_checksums[seed] = result.input_checksums[seed]
            sources += [(f, (jobdir / f.name).open("rb")) for f in kept.outputs[seed]]
    except OSError as exc:
        _close(sources)
        log.warning("reference cache %s not written: %s", folder, exc)
        return
    with _pending_lock:
        if folder in _pending:  # this process is already writing this entry
            _close(sources)
            return
        fut = _writer().submit(_write_files, folder, sources, kept)
        _pending[folder] = fut
    fut.add_done_callback(lambda _: _done(folder))


def _done(folder: Path) -> None:
    with _pending_lock:
        _pending.pop(folder, None)


TMP_PREFIX = ".tmp-"  # + the writing process (procs.ProcRef: pid and start time) + "-" + random


def sweep_stale(parent: Path) -> None:
    """Remove the temporary folders of cache writes whose process is gone (killed mid-copy: SIGKILL, a lost
    host, a full disk's crash), which would otherwise hold their GiBs for ever; a folder whose writer
    cannot be told (an older kbench's name) is left alone."""
    for entry in parent.glob(TMP_PREFIX + "*"):
        owner = ProcRef.parse(entry.name[len(TMP_PREFIX) :].split("-", 1)[0])
        if owner is not None and not owner.alive() and entry.is_dir():
            shutil.rmtree(entry, ignore_errors=True)


def _write_files(folder: Path, sources: list[tuple[TensorFile, Any]], kept: WorkerResult) -> None:
    tmp: Path | None = None
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        sweep_stale(folder.parent)
        tmp = Path(tempfile.mkdtemp(prefix=f"{TMP_PREFIX}{procs.self_ref()}-", dir=folder.parent))
        for f, fh in sources:
            with (tmp / f.name).open("wb") as out:
                if copy_verified(fh, out, f) != f.sha256:
                    raise ForgedResult(f"tensor file {f.name} changed after the reference signed it")
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


def _close(sources: list[tuple[TensorFile, Any]]) -> None:
    for _, fh in sources:
        fh.close()
