"""Device-side kernel time of shipped solutions, for benchmarks/timing_fidelity.py (its own process).

    python benchmarks/timing_fidelity_profile.py REQUEST.json          # torch.profiler pass, all items
    python benchmarks/timing_fidelity_profile.py REQUEST.json --ncu    # window for Nsight Compute, 1 item

The candidate is loaded like the evaluation worker loads it: same load_inline build cache (the build
from the prebuild phase is reused, so the request's environment must carry the same
TORCH_CUDA_ARCH_LIST and build switches), same numerics, `ModelNew` under the init seed, inputs from
`make_inputs`. The solutions are the suite's own trusted files, so no sandbox is needed here.

torch.profiler pass: before every call the L2 is flushed, as kbench.timing does, but with an op no
fp32 candidate launches (`bitwise_not_` on a uint8 buffer of 2x the L2 size), so the flush kernels can
be told apart by name (learned from profiling flushes alone) and serve as separators between calls.
A row per item is appended to the request's `out` JSONL as soon as it exists.

--ncu: warm-up, then `calls` forward calls between cudaProfilerStart/Stop, so `ncu --profile-from-start
off` profiles only those kernels (ncu flushes caches itself before each kernel replay).
"""

from __future__ import annotations

import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

FLUSH_PROBES = 3
TIMING_SEEDS = [2000, 2001, 2002]  # kbench.evaluate.REFERENCE_TIMING_SEEDS: same shapes as the timed sets


def load_model(item: dict[str, Any], req: dict[str, Any], index: int) -> tuple[Any, list[list[Any]]]:
    from kbench.problems import get_problem, load
    from kbench.problems.inputs import TORCH_DTYPES, make_inputs

    device = torch.device(req["device"])
    loaded = load(get_problem(item["problem"]), req["preset"])
    spec = importlib.util.spec_from_file_location(f"kbench_fidelity_{index}", item["file"])
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    torch.manual_seed(req["init_seed"])
    init = loaded.get_init_inputs()
    torch.manual_seed(req["init_seed"])
    model = module.ModelNew(*init).to(device)
    if req["dtype"] != "fp32":
        model = model.to(TORCH_DTYPES[req["dtype"]])
    sets = [make_inputs(loaded.get_inputs, s, device, req["dtype"]) for s in TIMING_SEEDS]
    return model, sets


def _device_events(prof: Any) -> list[tuple[float, float, str]]:
    """(start us, duration us, name) of every device activity, in start order."""
    out = []
    for evt in prof.events():
        if evt.device_type == torch.autograd.DeviceType.CUDA:
            out.append((float(evt.time_range.start), float(evt.time_range.elapsed_us()), evt.name))
    return sorted(out)


def flush_names(flush: torch.Tensor) -> set[str]:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:  # as profile_item
        for _ in range(FLUSH_PROBES):
            flush.bitwise_not_()
        torch.cuda.synchronize()
    return {name for _, _, name in _device_events(prof)}


def split_calls(events: list[tuple[float, float, str]], flush: set[str]) -> list[list[tuple[float, str]]]:
    """Per call, the (duration us, name) of its device activities; a flush kernel opens each call."""
    calls: list[list[tuple[float, str]]] = []
    for _, us, name in events:
        if name in flush:
            calls.append([])
        elif calls:
            calls[-1].append((us, name))
    return calls


def profile_item(model: Any, sets: list[list[Any]], flush: torch.Tensor, names: set[str], n: int) -> dict:
    from torch.profiler import ProfilerActivity, profile

    for i in range(10):  # warm-up: lazy init, cuBLAS handles, Triton JIT
        model(*sets[i % len(sets)])
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for i in range(n):
            flush.bitwise_not_()
            model(*sets[i % len(sets)])
        torch.cuda.synchronize()
    calls = split_calls(_device_events(prof), names)
    counts = [len(c) for c in calls]
    sums_ms = [sum(us for us, _ in c) / 1e3 for c in calls]
    kernels = sorted({name for c in calls for _, name in c})
    return {
        "calls_seen": len(calls),
        "kernels_per_call": statistics.median(counts) if counts else None,
        "kernels_per_call_set": sorted(set(counts)),
        "single_kernel": bool(counts) and len(calls) == n and set(counts) == {1},
        "kernel_ms_median": statistics.median(sums_ms) if sums_ms else None,
        "kernel_ms_min": min(sums_ms) if sums_ms else None,
        "kernel_names": [k[:160] for k in kernels[:4]],
    }


def run_torch(req: dict[str, Any]) -> None:
    props = torch.cuda.get_device_properties(torch.device(req["device"]))
    l2 = int(getattr(props, "L2_cache_size", 0) or 64 * 2**20)
    flush = torch.zeros(2 * l2, dtype=torch.uint8, device=req["device"])
    names = flush_names(flush)
    out = Path(req["out"])
    for index, item in enumerate(req["items"]):
        t0 = time.perf_counter()
        row: dict[str, Any] = {"kind": "profile", "problem": item["problem"], "flush_kernels": sorted(names)}
        try:
            model, sets = load_model(item, req, index)
            row.update(profile_item(model, sets, flush, names, req["calls"]))
        except Exception as exc:  # one solution failing to load is recorded; the others still run
            row["error"] = f"{type(exc).__name__}: {exc}"[:500]
        row["seconds"] = round(time.perf_counter() - t0, 2)
        with out.open("a") as fh:
            fh.write(json.dumps(row) + "\n")
        print(json.dumps(row)[:300], flush=True)


def run_ncu_window(req: dict[str, Any]) -> None:
    model, sets = load_model(req["items"][0], req, 0)
    for i in range(10):
        model(*sets[i % len(sets)])
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    for i in range(req["calls"]):
        model(*sets[i % len(sets)])
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()


NCU_METRIC = "gpu__time_duration.sum"
_NS_PER = {
    "ns": 1.0,
    "nsecond": 1.0,
    "us": 1e3,
    "usecond": 1e3,
    "ms": 1e6,
    "msecond": 1e6,
    "s": 1e9,
    "second": 1e9,
}


def ncu_command(ncu: str, log: Path, target: list[str]) -> list[str]:
    """Kernel duration at the GPU's own clocks (no locking), only inside cudaProfilerStart/Stop."""
    return [
        ncu, "--clock-control", "none", "--profile-from-start", "off", "--metrics", NCU_METRIC,
        "--csv", "--page", "raw", "--print-units", "base", "--log-file", str(log), *target,
    ]  # fmt: skip


def parse_ncu_csv(text: str) -> list[float]:
    """Per-kernel gpu__time_duration.sum in ms from `ncu --csv --page raw` (header, units row, rows)."""
    import csv

    lines = [ln for ln in text.splitlines() if ln.startswith('"')]  # ncu's own ==PROF== lines are not CSV
    rows = list(csv.reader(lines))
    header = next((i for i, r in enumerate(rows) if NCU_METRIC in r), None)
    if header is None:
        return []
    col = rows[header].index(NCU_METRIC)
    scale, out = 1.0, []
    for r in rows[header + 1 :]:
        cell = r[col].replace(",", "") if col < len(r) else ""
        try:
            out.append(float(cell) * scale / 1e6)
        except ValueError:
            scale = _NS_PER.get(cell.strip(), 1.0)  # the units row
    return out


def main(argv: list[str]) -> int:
    from kbench.backends import KernelRecorder, get_backend
    from kbench.problems.inputs import ieee_numerics
    from kbench.referee.builds import trusted_request

    req = json.loads(Path(argv[1]).read_text())
    ieee_numerics()  # the evaluation workers' numerics (TF32 off): the same cuBLAS kernels run
    torch.set_grad_enabled(False)
    cache = Path(req["cache_dir"])
    get_backend(req["backend"]).install_hooks(KernelRecorder(), cache, trusted_request(cache))
    if "--ncu" in argv:
        run_ncu_window(req)
    else:
        run_torch(req)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
