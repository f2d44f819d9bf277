"""The reference worker (`python -m kbench.worker.reference JOBDIR`); its disk cache is the host's
(evaluate/reference_cache.py).

The worker runs trusted code only: it builds `Model` under the fixed init seed (KernelBench's semantics,
problems.build_model), casts it to the problem dtype, writes the output and input checksums for each
seed, and times eager and torch.compile (`default`, plus `max-autotune-no-cudagraphs` on a GPU) with the
same `time_callable` the candidate gets.

"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

from kbench.baselines.modes import compiles, get_mode
from kbench.sandbox import procs
from kbench.sandbox.offer import write_layouts
from kbench.sandbox.protocol import (
    JOB_FILE,
    JobSpec,
    TensorFile,
    WorkerResult,
    announce,
    read_key,
    write_result,
)
from kbench.sandbox.tensorfiles import save_tensors
from kbench.types import TimingStats


def _timed_modes(spec: JobSpec, model: Any, loaded: Any, phases: dict[str, float]) -> dict[str, TimingStats]:
    import torch

    from kbench.problems.inputs import make_inputs
    from kbench.worker.timing import time_callable

    device = torch.device(spec.device)
    sets = [make_inputs(loaded.get_inputs, s, device, spec.dtype) for s in spec.timing_seeds]
    out = {}
    for mode in spec.baselines:
        compile_mode = get_mode(mode).compile_mode
        fn = model if compile_mode is None else torch.compile(model, mode=compile_mode)
        t0 = time.perf_counter()
        out[mode] = time_callable(fn, sets, spec.timing, device).stats
        phases[f"time_{mode}"] = round(time.perf_counter() - t0, 3)  # incl. torch.compile's own compile
    return out


def compute_reference(spec: JobSpec, jobdir: Path, key: bytes | None = None) -> WorkerResult:
    import torch

    from kbench.problems import build_model, load
    from kbench.problems.inputs import TORCH_DTYPES, flatten_outputs, ieee_numerics, make_inputs
    from kbench.sandbox import lease, timinglock
    from kbench.worker import timing
    from kbench.worker.checksums import checksum

    ieee_numerics()
    torch.set_grad_enabled(False)
    timing.pin_threads(spec.timing)
    device = torch.device(spec.device)
    assert spec.problem is not None
    result = WorkerResult()
    leased = lease.required(spec.role, spec.device)
    if leased:
        # The CUDA start off the lease where no timing loop runs now (sandbox/timinglock.py `early_cuda`). Not on a
        # thread beside the CPU work below, as the candidate's is: building the model is Python that needs
        # the GIL too, and on an H200 host it then took about as much longer as the CUDA start (0.2-0.3 s).
        t0 = time.perf_counter()
        if timinglock.early_cuda(spec.device):
            result.phases["cuda_start"] = round(time.perf_counter() - t0, 3)
    # Trusted CPU work first, while another job may hold the GPU: loading the problem and building its
    # model on the CPU (as before, under the init seed) need no device.
    t0 = time.perf_counter()
    announce(jobdir, "load")
    loaded = load(spec.problem, spec.preset)
    model = build_model(loaded, spec.init_seed)
    if spec.measure and device.type == "cuda" and compiles(spec.baselines):
        from kbench.backends.triton import prewarm_cache_key

        prewarm_cache_key(spec.cache_dir)  # Inductor's kernels are Triton's: their first lookup needs its key
    result.phases["construct"] = round(time.perf_counter() - t0, 3)
    if leased:  # before any GPU work (sandbox/lease.py)
        announce(jobdir, "lease")
        try:
            waited = lease.acquire(lease.device_id(spec.device), jobdir, spec.lease_wait_s, spec.role)
        except lease.LeaseTimeout as exc:
            result.error = str(exc)
            return result
        result.phases["lease"] = round(waited, 3)
    announce(jobdir, "reference")
    t0 = time.perf_counter()
    model = model.to(device)  # on a GPU, this process's CUDA start unless it came first (`cuda_start`)
    if spec.dtype != "fp32":
        model = model.to(TORCH_DTYPES[spec.dtype])
    result.phases["device"] = round(time.perf_counter() - t0, 3)
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
    if key is not None:
        # The outputs' shapes, signed, before their slow write: the host offers the candidate its device
        # buffers from them while this worker writes (sandbox/offer.py).
        write_layouts(jobdir, {tag: values for tag, (_, values) in outputs.items()}, key)
    delivered: dict[tuple[str, int], TensorFile] = {}
    if spec.receive and key is not None:
        # Into the host's own device buffers, offered from the layouts just signed: a copy on the device
        # (milliseconds, under the lease), where writing them out and the host's read and verification
        # took seconds on a cold verdict's critical path.
        t0 = time.perf_counter()
        delivered = _deliver(jobdir, key, outputs)
        result.phases["deliver"] = round(time.perf_counter() - t0, 3)
    if leased:
        # The GPU work is done and the code is trusted: the next job may start its GPU phase while this
        # one writes its files and exits (a candidate worker keeps its lease until it dies). Outputs kept
        # on the GPU are copied out meanwhile: copy engines and a few GB/s of memory traffic, no SM time.
        torch.cuda.synchronize(device)
        lease.release()
    t0 = time.perf_counter()
    for_cache = {str(seed) for seed in spec.cache_seeds} if spec.cache_folder else set()
    for tag, (devices, values) in outputs.items():
        entries: list[TensorFile | None] = [delivered.get((tag, i)) for i in range(len(values))]
        # the disk cache's seeds (the fixed ones, on a miss) are written there, delivered or not; the others
        # to the job folder, only those the host did not take on the device
        folder = Path(spec.cache_folder) if tag in for_cache else jobdir
        todo = [i for i, e in enumerate(entries) if e is None or tag in for_cache]
        files = dict(zip(todo, save_tensors(folder, f"out_{tag}", [values[i] for i in todo]), strict=True))
        for i in todo:
            entries[i] = files[i].model_copy(update={"received": entries[i] is not None})
        result.outputs[tag] = [
            e.model_copy(update={"device": d}) for e, d in zip(entries, devices, strict=True) if e is not None
        ]
    result.phases["write"] = round(time.perf_counter() - t0, 3)
    return result


OFFER_WAIT_S = 30.0  # the host offers within milliseconds of the layouts; past this, files as before


def _deliver(
    jobdir: Path, key: bytes, outputs: dict[str, tuple[list[str], list[Any]]]
) -> dict[tuple[str, int], TensorFile]:
    """Copy each output the host offered a buffer for into it; the entries of those delivered."""
    from kbench.worker.inbox import Inbox

    inbox = Inbox(jobdir, key, wait_s=OFFER_WAIT_S)
    try:
        found = {}
        for tag, (_, values) in outputs.items():
            for i, value in enumerate(values):
                entry = inbox.deliver(tag, i, value)
                if entry is not None:
                    found[(tag, i)] = entry
        return found
    finally:
        inbox.close()


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
    write_result(jobdir, compute_reference(spec, jobdir, key), key)
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown: after torch.compile it waits ~3 s (2 loaded cores) for Inductor's
    # compile workers and atexit hooks; the result is already written and signed.
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
