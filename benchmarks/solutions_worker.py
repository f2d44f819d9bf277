"""Worker side of benchmarks/solutions.py: runs inside subprocesses, one batch or one warm-up job each.

    solutions_worker.py --batch baseline|BACKEND --out DIR --problems 1,2,3 [--device cuda --preset full]
    solutions_worker.py --warm cuda:7 --out DIR

A batch appends one JSON line per problem to DIR/BATCH.jsonl as soon as it has it; a failing solution is a
row with its error, and the batch goes on. This is trusted benchmark code timing our own solutions, so it
imports them in-process (the evaluator's sandbox is for untrusted candidates).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from common import ROOT

from kbench.backends import get_backend, gpu_backends

SOLUTIONS = ROOT / "src" / "kbench" / "suite" / "solutions"
BACKENDS = ("cuda", "triton")  # timed by default; any other backend whose kernels run on a GPU when named
BATCHES = ("baseline", *gpu_backends(True))
CACHE = Path(tempfile.gettempdir()) / "kbench-solutions-cache"  # builds stay out of the results folder
BUILDS = CACHE / "builds"


def parse_ids(spec: str) -> list[int]:
    """Level-2 ids from e.g. "1-36,40"; an empty spec is the whole level (`level2_ids`)."""
    if not spec:
        return level2_ids()
    ids: list[int] = []
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        ids.extend(range(int(lo), int(hi or lo) + 1))
    return ids


def level2_ids() -> list[int]:
    """Every level-2 problem of the embedded suite, in order."""
    from kbench.problems.sources import load_source

    return sorted(p.number for p in load_source("kbench") if p.level == 2)


def solution_path(backend: str, pid: int) -> Path | None:
    found = sorted((SOLUTIONS / backend / "level2").glob(f"{pid}_*.py"))
    return found[0] if found else None


def _problem(pid: int) -> Any:
    from kbench.problems.sources import load_source

    for p in load_source("kbench"):
        if p.level == 2 and p.number == pid:
            return p
    raise SystemExit(f"no level-2 problem {pid} in the embedded suite")


def _setup(args: argparse.Namespace, pid: int) -> tuple[Any, Any, list[Any]]:
    """Problem, its loaded module under the preset, and the inputs (seed 0) on the device."""
    import torch

    from kbench.problems.loader import load

    problem = _problem(pid)
    loaded = load(problem, args.preset)
    torch.manual_seed(0)
    inputs = [x.to(args.device) if isinstance(x, torch.Tensor) else x for x in loaded.get_inputs()]
    return problem, loaded, inputs


def _model(args: argparse.Namespace, loaded: Any, model_cls: Any = None) -> Any:
    """The reference, or `model_cls` built under the same seed (so it holds the same parameters)."""
    import torch

    torch.manual_seed(42)
    init = loaded.get_init_inputs()
    torch.manual_seed(42)
    return (model_cls or loaded.Model)(*init).to(args.device)


def _install_build_cache(root: Path) -> None:
    """Build CUDA solutions through kbench's content-addressed build cache, as the evaluator's workers do:
    the cheaper header recipes first (same binary meaning, less to compile: build-recipes in
    benchmarks/results), one finished build per source shared by every process, no lock files."""
    from kbench.backends import KernelRecorder, buildcache
    from kbench.referee.builds import trusted_request

    buildcache.install(KernelRecorder(), root, trusted_request(root.parent))


def _import(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(f"kbench_solution_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _sync(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def _release(device: str) -> None:
    """Return the last problem's cached blocks: full presets hold up to ~2 GiB of inputs and outputs."""
    import gc

    import torch

    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()


def _time(args: argparse.Namespace, fn: Any, loaded: Any) -> dict[str, Any]:
    from kbench.referee.local import time_model
    from kbench.types import TimingSettings

    # The referee's loop, in this process: batches, inputs made fresh for every call from the problem's
    # get_inputs; >= 20 batches, then stop at the budget: a per-problem cap keeps the run within minutes.
    settings = TimingSettings(budget_s=args.budget_s)
    stats = time_model(fn, loaded.get_inputs, args.device, "fp32", settings)
    return {
        "median_ms": stats.median_ms,
        "iqr_ms": stats.iqr_ms,
        "n": stats.n,
        "meaningful": stats.meaningful,
    }


def _sol(problem: Any, preset: str) -> dict[str, Any]:
    from kbench.analysis.gpus import detect_gpu
    from kbench.analysis.roofline import speed_of_light

    gpu = detect_gpu()
    if gpu is None:
        return {"sol_ms": None, "bound": None}
    sol = speed_of_light(problem, preset, "fp32", gpu)
    return {"sol_ms": sol.sol_ms, "bound": sol.bound}


def _compare(out: Any, ref: Any, tol: float) -> tuple[bool, float]:
    import torch

    if not isinstance(out, torch.Tensor) or out.shape != ref.shape or out.dtype != ref.dtype:
        return False, math.inf
    err = (out - ref).abs()
    ok = bool(torch.all(err <= tol + tol * ref.abs()).item()) and bool(torch.isfinite(out).all().item())
    return ok, float(err.max().item()) if err.numel() else 0.0


def _reference64(args: argparse.Namespace, loaded: Any, inputs: list[Any]) -> Any:
    """The reference run in fp64 (same parameters, inputs widened), the yardstick for fp32 rounding; None
    where an operator has no fp64 kernel."""
    import torch

    wide = [x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]
    try:
        with torch.no_grad():
            out = _model(args, loaded).double()(*wide)
    except (RuntimeError, NotImplementedError):
        return None
    return out if isinstance(out, torch.Tensor) else None


def _err64(out: Any, ref64: Any) -> float | None:
    """Max abs difference from the fp64 reference."""
    import torch

    if ref64 is None or not isinstance(out, torch.Tensor) or out.shape != ref64.shape:
        return None
    return float((out.double() - ref64).abs().max().item()) if out.numel() else 0.0


def run_baseline(args: argparse.Namespace, pid: int) -> dict[str, Any]:
    import torch

    problem, loaded, inputs = _setup(args, pid)
    model = _model(args, loaded)
    row: dict[str, Any] = {"problem": pid, "name": problem.name, "tags": list(problem.tags)}
    row.update(_sol(problem, args.preset))
    with torch.no_grad():
        row["eager_err64"] = _err64(model(*inputs), _reference64(args, loaded, inputs))
    row["eager"] = _time(args, model, loaded)
    if not args.no_compile:
        compiled = torch.compile(model)
        with torch.no_grad():
            compiled(*inputs)
        row["compile"] = _time(args, compiled, loaded)
    return row


def run_solution(args: argparse.Namespace, pid: int) -> dict[str, Any]:
    import torch

    path = solution_path(args.batch, pid)
    if path is None:
        return {"problem": pid, "status": "missing"}
    module = _import(path)
    problem, loaded, inputs = _setup(args, pid)
    with torch.no_grad():
        ref = _model(args, loaded)(*inputs)
    model = _model(args, loaded, module.ModelNew)
    with torch.no_grad():
        out = model(*inputs)
    _sync(args.device)
    ok, max_err = _compare(out, ref, problem.tol("fp32"))
    row: dict[str, Any] = {"problem": pid, "status": "ok" if ok else "mismatch", "max_abs_err": max_err}
    row["err64"] = _err64(out, _reference64(args, loaded, inputs))
    del ref
    if ok:
        row["time"] = _time(args, model, loaded)
    return row


def run_batch(args: argparse.Namespace) -> None:
    out = Path(args.out) / f"{args.batch}.jsonl"
    for pid in parse_ids(args.problems):
        t0 = time.perf_counter()
        try:
            row = run_baseline(args, pid) if args.batch == "baseline" else run_solution(args, pid)
        except Exception as exc:  # a failing solution is a result; the batch goes on
            row = {"problem": pid, "status": "error", "error": f"{type(exc).__name__}: {exc}"[-2000:]}
            traceback.print_exc()
        row["seconds"] = round(time.perf_counter() - t0, 2)
        _release(args.device)
        with out.open("a") as fh:
            fh.write(json.dumps(row) + "\n")
        print(f"[{args.batch}] {pid}: {row.get('status', 'ok')} {row['seconds']} s", flush=True)


def warm(args: argparse.Namespace) -> None:
    """Build or JIT one solution, or compile one reference, so the timing batches hit the disk caches."""
    import torch

    kind, pid = args.warm.split(":")
    if kind == "compile":
        _, loaded, inputs = _setup(args, int(pid))
        with torch.no_grad():
            torch.compile(_model(args, loaded))(*inputs)
    else:
        path = solution_path(kind, int(pid))
        assert path is not None
        module = _import(path)
        if not get_backend(kind).prebuilds:  # JIT-compiled at the first call: run once
            _, loaded, inputs = _setup(args, int(pid))
            with torch.no_grad():
                _model(args, loaded, module.ModelNew)(*inputs)
    _sync(args.device)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--batch", choices=BATCHES)
    ap.add_argument("--warm", help="KIND:ID with KIND a GPU backend (cuda, triton, ...) or compile")
    ap.add_argument("--problems", default="", help="level-2 ids (default: the whole level)")
    ap.add_argument("--budget-s", type=float, default=0.5)
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--preset", default="full")
    ap.add_argument("--builds", type=Path, default=BUILDS, help="kbench's build cache for the CUDA solutions")
    args = ap.parse_args()
    from kbench.problems.inputs import ieee_numerics

    _install_build_cache(args.builds)
    ieee_numerics()  # fp32 as fp32 (TF32 off for cuDNN too), as the evaluator's workers run
    if args.warm:
        warm(args)
    elif args.batch:
        run_batch(args)
    else:
        ap.error("one of --batch or --warm is required")


if __name__ == "__main__":
    main()
