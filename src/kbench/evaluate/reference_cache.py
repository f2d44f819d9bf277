"""The reference run's disk cache (host side).

The host caches the fixed seeds' outputs and the timings under `cache_dir/reference/KEY` (the reference
worker writes the files into a temporary folder beside it, which the host renames into place), KEY =
problem code hash + preset + dtype + torch version + device + seeds + timing settings + baselines. The
per-run secret seeds are never cached: each evaluation starts one reference job for them (and, on a cache
miss, for everything). The reference worker itself is worker/reference.py.

The cache keeps to a size (`trim_cache`) with the reference pool's policy, GreedyDual-Size with one cost
per entry (`size_credit`): an entry saves one reference run per later use whatever its size, so the bytes
go where they keep the most entries. Least-recently-used alone kept nothing of a run that visits more
problems than the cache holds in turn (a batch's repeated passes, an RL loop over the suite): each entry
was removed just before its problem came back. The credits live on disk, one small file per entry and
the cache's floor beside the entries, so every run and process sharing the cache works from the same ones.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kbench.sandbox import procs
from kbench.sandbox.procs import ProcRef
from kbench.sandbox.protocol import JobSpec, WorkerResult
from kbench.types import TimingStats

CACHE_FILE = "reference.json"
CREDIT_FILE = "credit"  # in an entry: its credit for trim_cache (text)
# beside the entries: the credit of the last entry removed (GreedyDual-Size's inflation)
FLOOR_FILE = ".floor"
MIN_SIZE = 1 << 20  # an entry's size for its credit: outputs of a few bytes still hold a run
NUMERICS = "ieee-fp32-v2"  # ieee_numerics' settings and where make_inputs generates; in the cache key
# how baselines are timed (referee/timing.py: batches of fresh-input calls on the referee's clock); in the
# cache key, so timings taken otherwise are never mixed with a candidate timed this way; v2: a training
# step's forward pass is timed alone beside each mode's step
TIMING_PROTOCOL = "referee-batches-v2"


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


def size_credit(floor: float, size: int) -> float:
    """GreedyDual-Size's credit of an entry of `size` bytes just used, with one cost for every entry: 1/size
    (sizes below MIN_SIZE count as MIN_SIZE) on top of `floor`, the credit of the last entry evicted, so
    entries not used for long age out whatever their size. The lowest credit goes first."""
    return floor + MIN_SIZE / max(size, MIN_SIZE)


def cache_key(spec: JobSpec, torch_version: str, device_name: str) -> str:
    assert spec.problem is not None
    parts = {
        "code": hashlib.sha256(spec.problem.code.encode()).hexdigest(),
        "preset": spec.preset,
        "dtype": spec.dtype,
        "torch": torch_version,
        "device": device_name,
        "seeds": spec.seeds,
        "timing_protocol": TIMING_PROTOCOL,
        "timing": asdict(spec.timing),
        "baselines": spec.baselines,
        "init_seed": spec.init_seed,
        "measure": spec.measure,
        "numerics": NUMERICS,
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:24]


log = logging.getLogger(__name__)


def read_cache(folder: Path) -> WorkerResult | None:
    path = folder / CACHE_FILE
    try:
        return WorkerResult.model_validate_json(path.read_text())
    except (OSError, ValueError):  # absent, or written by another kbench version: computed again
        return None


def open_entry(folder: Path) -> Path | None:
    """A new temporary folder beside the cache entry `folder`, for the reference worker to write the fixed
    seeds' files into (None, logged, when it cannot be made: the run then caches nothing). Written once,
    where they will stay: copying a problem's fixed outputs (up to a few GiB) from the job folder after
    the verdict held up the command's exit by seconds."""
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        sweep_stale(folder.parent)
        return Path(tempfile.mkdtemp(prefix=f"{TMP_PREFIX}{procs.self_ref()}-", dir=folder.parent))
    except OSError as exc:
        log.warning("reference cache %s not written: %s", folder, exc)
        return None


def commit_entry(tmp: Path, folder: Path, result: WorkerResult, seeds: list[int]) -> None:
    """Make `tmp`, holding the worker's files of `seeds`, the entry `folder`: its listing (the outputs of
    `seeds`, their checksums and the timings) written, then renamed into place. A failure is logged and
    leaves no entry: the next run computes it again. The files are checked against their digests when an
    entry is read (`absorb`), not here."""
    try:
        kept = WorkerResult(timings=result.timings)
        for seed in map(str, seeds):
            # the cached entries are files: where an output also went into a device buffer, not any more
            kept.outputs[seed] = [f.model_copy(update={"received": False}) for f in result.outputs[seed]]
            kept.input_checksums[seed] = result.input_checksums[seed]
        (tmp / CACHE_FILE).write_text(kept.model_dump_json())
        _write_number(
            tmp / CREDIT_FILE, size_credit(_read_number(folder.parent / FLOOR_FILE), _entry_bytes(tmp))
        )
        try:
            os.rename(tmp, folder)
        except OSError:  # a concurrent run cached the same key first
            discard_entry(tmp)
    except (OSError, KeyError) as exc:  # the cache is an optimisation: a full disk must not lose the verdict
        log.warning("reference cache %s not written: %s", folder, exc)
        discard_entry(tmp)


def discard_entry(tmp: Path) -> None:
    shutil.rmtree(tmp, ignore_errors=True)


def touch_entry(folder: Path) -> None:
    """Mark the entry `folder` as just used: its credit renewed (`size_credit`) and its listing's mtime,
    which orders entries of equal credit (least recently used first)."""
    try:
        os.utime(folder / CACHE_FILE)
    except OSError:  # removed meanwhile by another run's trim: this run has read it already
        return
    _write_number(
        folder / CREDIT_FILE, size_credit(_read_number(folder.parent / FLOOR_FILE), _entry_bytes(folder))
    )


def _read_number(path: Path) -> float:
    """A credit or floor file's number; 0 where there is none (an entry an older kbench wrote goes first)."""
    try:
        return float(path.read_text())
    except (OSError, ValueError):
        return 0.0


def _write_number(path: Path, value: float) -> None:
    """Write `value` to `path` whole (a temporary file renamed over it), or nothing where that fails: the
    credits only order removals, and a concurrent run's trim may have removed the entry meanwhile."""
    # the writer's own name (process and thread): lanes of one run write the floor at once
    tmp = path.with_name(f"{TMP_PREFIX}{procs.self_ref()}-{threading.get_ident()}-{path.name.lstrip('.')}")
    try:
        tmp.write_text(repr(value))
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)


def _entry_bytes(folder: Path) -> int:
    total = 0
    try:
        for f in folder.iterdir():
            total += f.stat().st_size
    except OSError:  # removed meanwhile: what is left is not counted
        pass
    return total


def trim_cache(parent: Path, max_gb: float | None, keep: Path) -> list[Path]:
    """Remove the entries of the cache `parent` of the lowest credit (`size_credit`; among equals the least
    recently used) until it holds at most `max_gb` GB (None: no limit), never `keep` (the entry just
    written); the floor rises to the last credit removed. Returns the entries removed. Each is first
    renamed to a temporary name this process owns, so a concurrent run reading it finds no entry (and
    computes it again) or keeps the files it already opened; one left half-removed by a killed process
    is swept like any stale write. Full-size outputs run to GBs per problem: without a limit a run over
    the whole suite fills the disk."""
    if max_gb is None:
        return []
    entries = []
    try:
        children = list(parent.iterdir())
    except OSError:  # the cache is an optimisation: a folder that cannot be listed is left as it is
        return []
    for folder in children:
        listing = folder / CACHE_FILE
        if folder.name.startswith(TMP_PREFIX) or folder == keep:
            continue
        try:
            used = listing.stat().st_mtime
        except OSError:  # not an entry (or removed meanwhile)
            continue
        entries.append((_read_number(folder / CREDIT_FILE), used, folder, _entry_bytes(folder)))
    total = sum(e[3] for e in entries) + _entry_bytes(keep)
    removed = []
    floor = _read_number(parent / FLOOR_FILE)
    for credit, _, folder, size in sorted(entries, key=lambda e: e[:2]):
        if total <= max_gb * 1e9:
            break
        doomed = parent / f"{TMP_PREFIX}{procs.self_ref()}-trim-{folder.name}"
        try:
            os.rename(folder, doomed)
        except OSError:  # another run removed or renamed it first
            continue
        shutil.rmtree(doomed, ignore_errors=True)
        total -= size
        floor = max(floor, credit)
        removed.append(folder)
    if removed:
        _write_number(parent / FLOOR_FILE, floor)
        log.info("reference cache %s: %d entries removed (lowest credit first)", parent, len(removed))
    return removed


TMP_PREFIX = ".tmp-"  # + the writing process (procs.ProcRef: pid and start time) + "-" + random


def sweep_stale(parent: Path) -> None:
    """Remove the temporary folders of cache writes whose process is gone (killed mid-write: SIGKILL, a lost
    host, a full disk's crash), which would otherwise hold their GiBs for ever; a folder whose writer
    cannot be told (an older kbench's name) is left alone. A dead writer's half-written floor file goes too."""
    for entry in parent.glob(TMP_PREFIX + "*"):
        owner = ProcRef.parse(entry.name[len(TMP_PREFIX) :].split("-", 1)[0])
        if owner is None or owner.alive():
            continue
        if entry.is_dir():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
