"""The reference run of one evaluation (host side): the trusted reference worker's outputs for every seed
and its baseline timings, the fixed seeds' part from the disk cache (evaluate/reference_cache.py). The
worker itself is worker/reference.py."""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

from kbench.baselines.modes import modes_for
from kbench.config import RunConfig
from kbench.errors import ProblemError, WorkerError
from kbench.evaluate.device_outputs import LayoutWatch, Receiver, layouts
from kbench.evaluate.judge import crash_message
from kbench.evaluate.plan import Plan, job_spec, worker_preloads
from kbench.evaluate.prebuild import reference_env
from kbench.evaluate.reference_cache import (
    ReferenceData,
    cache_key,
    commit_entry,
    discard_entry,
    open_entry,
    read_cache,
    touch_entry,
    trim_cache,
)
from kbench.hardware import device_name
from kbench.sandbox.host import REFEREE, run_worker
from kbench.sandbox.offer import Layout
from kbench.sandbox.protocol import KEY_BYTES, ForgedResult, JobSpec, TensorFile, WorkerResult, read_result
from kbench.sandbox.tensorfiles import load_tensors, load_verified
from kbench.types import Problem, Status

log = logging.getLogger(__name__)


def get_reference(
    problem: Problem,
    cfg: RunConfig,
    plan: Plan,
    workdir: Path,
    skip: Collection[str] = (),
    on_layouts: Callable[[dict[int, list[Layout | None]]], None] | None = None,
    receiver: Receiver | None = None,
) -> ReferenceData:
    """Reference outputs for every seed and baseline timings (modes in `skip` are reused, not timed), the
    fixed part from the disk cache, whose key holds the modes timed. `on_layouts` gets every seed's output
    layouts (dtype, shape) once, as soon as the worker has signed them: when its GPU work is done, before it
    writes the outputs and long before the host has read them (device_outputs.LayoutWatch).

    With `receiver` (a GPU evaluation whose reference serves it alone) the worker copies its outputs into
    the receiver's device buffers, offered from those layouts, before it gives up the GPU; they become the
    outputs here, as they lie, and only the fixed seeds' are also written, for the disk cache. On a cache
    miss the worker writes the fixed seeds' files straight into a temporary folder beside the cache entry,
    renamed into place once they are read; a cache entry's files are checked against their digests
    whenever they are read. The receiver must outlive what this returns."""
    from kbench.hardware import torch_version

    on_gpu = plan.device.startswith("cuda")
    baselines = [b for b in modes_for(cfg.baselines, on_gpu) if b not in skip]
    fixed_spec = job_spec(
        problem,
        cfg,
        plan,
        role="reference",
        seeds=plan.fixed,
        baselines=baselines,
        measure=cfg.measure,
    )
    folder = cfg.cache_dir / "reference" / cache_key(fixed_spec, torch_version(), device_name(plan.device))
    t0 = time.perf_counter()
    cached, from_cache = _read_cached(folder)
    lookup = round(time.perf_counter() - t0, 3)  # a hit reads and checks every file of the entry
    run_seeds = plan.secret + ([] if cached else plan.fixed)
    known = layouts(cached.outputs, plan.fixed) if cached else {}
    tmp = open_entry(folder) if cached is None else None  # the worker writes the fixed seeds' files there
    spec = fixed_spec.model_copy(
        update={
            "seeds": run_seeds,
            "measure": cfg.measure and cached is None,
            "receive": receiver is not None,
            "cache_seeds": list(plan.fixed) if tmp is not None else [],
            "cache_folder": str(tmp) if tmp is not None else "",
        }
    )
    try:
        data, result = _run(problem, cfg, plan, workdir, spec, known, on_layouts, receiver)
    except BaseException:
        if tmp is not None:
            discard_entry(tmp)
        raise
    data.cache_hit = cached is not None
    data.phases["lookup"] = lookup
    if tmp is not None:
        t0 = time.perf_counter()
        commit_entry(tmp, folder, result, plan.fixed)
        trim_cache(folder.parent, cfg.reference_cache_gb, keep=folder)
        data.phases["cache"] = round(time.perf_counter() - t0, 3)
    data.outputs.update(from_cache.outputs)
    data.checksums.update(from_cache.checksums)
    data.timings = (cached or result).timings
    return data


def _read_cached(folder: Path) -> tuple[WorkerResult | None, ReferenceData]:
    """The cache entry `folder` and its outputs, each file read and checked against the digest the entry's
    listing records (a file damaged, cut short by a full disk, or rewritten alone); an entry that fails
    the check is removed, logged, and computed again like a miss. Writing the cache at all is what the
    candidate's confinement keeps from it (docs/anti-cheat.md)."""
    cached, data = read_cache(folder), ReferenceData()
    if cached is None:
        return None, data
    try:
        absorb(data, cached, folder, _verified_or_received(None))
    except ForgedResult as exc:
        log.warning("reference cache %s removed, computed again: %s", folder, exc)
        discard_entry(folder)
        return None, ReferenceData()
    touch_entry(folder)
    return cached, data


def _run(
    problem: Problem,
    cfg: RunConfig,
    plan: Plan,
    workdir: Path,
    spec: JobSpec,
    known: dict[int, list[Layout | None]],
    on_layouts: Callable[[dict[int, list[Layout | None]]], None] | None,
    receiver: Receiver | None,
) -> tuple[ReferenceData, WorkerResult]:
    """The reference worker, start to exit, and its outputs taken in (the cache's seeds' files from the
    folder its spec names)."""
    run_seeds = spec.seeds
    jobdir = workdir / "reference"
    env = reference_env(cfg, plan.device)
    budgets = cfg.budgets("reference")
    key = receiver.key if receiver is not None else secrets.token_bytes(KEY_BYTES)
    deliver = on_layouts
    if receiver is not None:
        deliver = _offer_first(receiver, jobdir, run_seeds, on_layouts)
    watch = LayoutWatch(jobdir, key, known, deliver) if deliver is not None else None
    try:
        preload = worker_preloads(spec)
        exit_ = run_worker(
            REFEREE, jobdir, spec, budgets, env=env, start=cfg.worker_start, key=key, preload=preload
        )
    finally:
        if watch is not None:
            watch.stop()  # layouts not delivered yet come from the signed result below
    t0 = time.perf_counter()
    result = read_result(jobdir, exit_.key, files=False) if not exit_.timed_out else None
    if result is not None and result.error:
        raise WorkerError(result.error)
    if result is None or result.status is not Status.OK:
        if result is not None:  # its referee saw the problem's code fail: "the runner exited with code 3..."
            why = f"failed: {result.status.value}: {result.message}"
        elif exit_.timed_out:
            why = f"ran past its {exit_.phase} budget of {exit_.budget_s:.0f} s"
        else:  # e.g. "worker exited with code 70 without writing a result"
            why = f"failed: {crash_message(exit_.returncode)}"
        tail = exit_.log_tail or "(the worker wrote nothing to its log)"
        raise ProblemError(f"{problem.key}: the reference {why} ({problem.path}):\n{tail}")
    if watch is not None:
        watch.settle(result.outputs)
    data = ReferenceData(
        phases={
            **result.phases,
            "wall": round(exit_.seconds, 3),
            "spawn": round(exit_.spawn_s, 3),
            **exit_.start_phases,
        },
    )
    tmp = Path(spec.cache_folder) if spec.cache_folder else None
    absorb(data, result, jobdir, _verified_or_received(receiver, tmp, {str(s) for s in spec.cache_seeds}))
    if receiver is not None:
        receiver.keep_only(
            {(s, i) for s, files in result.outputs.items() for i, f in enumerate(files) if f.received}
        )
    data.phases["read"] = round(time.perf_counter() - t0, 3)  # reading and verifying the signed files
    return data, result


def _offer_first(
    receiver: Receiver,
    jobdir: Path,
    seeds: list[int],
    then: Callable[[dict[int, list[Layout | None]]], None] | None,
) -> Callable[[dict[int, list[Layout | None]]], None]:
    """The layouts' delivery: first the reference's own buffers (it waits for them holding the GPU), then
    `then` (the candidate's offer)."""

    def deliver(found: dict[int, list[Layout | None]]) -> None:
        try:
            receiver.offer(jobdir, {s: found[s] for s in seeds if s in found})
        finally:
            if then is not None:
                then(found)

    return deliver


def _verified_or_received(
    receiver: Receiver | None, tmp: Path | None = None, in_tmp: Collection[str] = ()
) -> Callable[[Path, list[TensorFile], str], list[Any]]:
    """How `absorb` takes one seed's outputs: delivered ones are the receiver's buffers, the rest are read
    and checked against their signed digests (load_verified), from `tmp` for the seeds `in_tmp`."""

    def load(folder: Path, files: list[TensorFile], seed: str) -> list[Any]:
        where = tmp if tmp is not None and seed in in_tmp else folder
        by_index = {i: f for i, f in enumerate(files) if not f.received}
        read = dict(zip(by_index, load_verified(where, list(by_index.values())), strict=True))
        outs = []
        for i, f in enumerate(files):
            if not f.received:
                outs.append(read[i])
                continue
            buffer = receiver.tensor(seed, i) if receiver is not None else None
            if buffer is None:
                raise ForgedResult(f"output {i} of seed {seed} listed in a device buffer never offered")
            outs.append(buffer)
        return outs

    return load


def absorb(
    data: ReferenceData,
    result: WorkerResult,
    folder: Path,
    load: Callable[[Path, list[TensorFile], str], list[Any]] | None = None,
) -> None:
    """Take `result`'s outputs (files in `folder`, read with `load(folder, files, seed)`, else mapped) and
    input checksums into `data`."""
    for seed, files in result.outputs.items():
        data.outputs[int(seed)] = load(folder, files, seed) if load else load_tensors(folder, files)
        if seed in result.input_checksums:
            data.checksums[int(seed)] = result.input_checksums[seed]
