"""Benchmark the shipped level-2 solutions on a GPU against eager PyTorch and torch.compile.

    python benchmarks/solutions.py --out benchmarks/results/solutions-h200

Three phases, each failure recorded and skipped rather than fatal:
1. warm-up, in parallel subprocesses (one per job, a hard timeout each): build every CUDA solution
   (load_inline caches by name under the shared extension folder), run every Triton solution once (Triton's
   disk cache) and torch.compile every reference once (Inductor's disk cache). Cold, the CUDA builds alone
   take ~55 s each; 16 at a time brings the phase to ~3 minutes on a 16-core H200 host.
2. timing, one subprocess per batch (baselines, cuda, triton), problems in order; each result is appended
   to a JSONL file as soon as it exists, so a crash loses one problem: the batch is restarted after it.
   All modes use kbench.timing.time_callable (CUDA events, L2 flush, warm-up, median of >= 50 calls).
3. report: results.json, solutions.md (a table per problem and a summary), and a printed summary with the
   geometric-mean speedups over eager of the solutions and of torch.compile on the same problems.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = ROOT / "src" / "kbench" / "suite" / "solutions"
BACKENDS = ("cuda", "triton")
BATCHES = ("baseline", *BACKENDS)


def parse_ids(spec: str) -> list[int]:
    ids: list[int] = []
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        ids.extend(range(int(lo), int(hi or lo) + 1))
    return ids


def solution_path(backend: str, pid: int) -> Path | None:
    found = sorted((SOLUTIONS / backend / "level2").glob(f"{pid}_*.py"))
    return found[0] if found else None


# ---------------------------------------------------------------- worker side (inside subprocesses)


def _problem(pid: int) -> Any:
    from kbench.problems.sources import load_source

    for p in load_source("kbench"):
        if p.level == 2 and p.number == pid:
            return p
    raise SystemExit(f"no level-2 problem {pid} in the embedded suite")


def _setup(pid: int, model_cls: Any = None) -> tuple[Any, Any, list[Any]]:
    """Problem, model (reference, or `model_cls` built under the same seed) and inputs on the GPU."""
    import torch

    from kbench.problems.loader import load

    problem = _problem(pid)
    loaded = load(problem, "full")
    torch.manual_seed(42)
    init = loaded.get_init_inputs()
    torch.manual_seed(42)
    model = (model_cls or loaded.Model)(*init).cuda()
    torch.manual_seed(0)
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in loaded.get_inputs()]
    return problem, model, inputs


def _import(path: Path) -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"kbench_solution_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _time(fn: Any, inputs: list[Any], budget_s: float) -> dict[str, Any]:
    import torch

    from kbench.timing import TimingSettings, time_callable

    settings = TimingSettings(budget_s=budget_s, min_runs=50, target_rse=0.0, max_runs=400)
    with torch.no_grad():
        stats = time_callable(fn, [inputs], settings, torch.device("cuda")).stats
    return {"median_ms": stats.median_ms, "iqr_ms": stats.iqr_ms, "n": stats.n}


def _sol(problem: Any) -> dict[str, Any]:
    from kbench.analysis.gpus import detect_gpu
    from kbench.analysis.roofline import speed_of_light

    gpu = detect_gpu()
    if gpu is None:
        return {"sol_ms": None, "bound": None}
    sol = speed_of_light(problem, "full", "fp32", gpu)
    return {"sol_ms": sol.sol_ms, "bound": sol.bound}


def _compare(out: Any, ref: Any, tol: float) -> tuple[bool, float]:
    import torch

    if not isinstance(out, torch.Tensor) or out.shape != ref.shape or out.dtype != ref.dtype:
        return False, math.inf
    err = (out - ref).abs()
    ok = bool(torch.all(err <= tol + tol * ref.abs()).item()) and bool(torch.isfinite(out).all().item())
    return ok, float(err.max().item()) if err.numel() else 0.0


def run_baseline(pid: int, budget_s: float, compile_too: bool) -> dict[str, Any]:
    import torch

    problem, model, inputs = _setup(pid)
    row: dict[str, Any] = {"problem": pid, "name": problem.name, "tags": list(problem.tags)}
    row.update(_sol(problem))
    row["eager"] = _time(model, inputs, budget_s)
    if compile_too:
        compiled = torch.compile(model)
        with torch.no_grad():
            compiled(*inputs)
        row["compile"] = _time(compiled, inputs, budget_s)
    return row


def run_solution(backend: str, pid: int, budget_s: float) -> dict[str, Any]:
    import torch

    path = solution_path(backend, pid)
    if path is None:
        return {"problem": pid, "status": "missing"}
    module = _import(path)
    problem, ref_model, inputs = _setup(pid)
    with torch.no_grad():
        ref = ref_model(*inputs)
    _, model, _ = _setup(pid, module.ModelNew)
    with torch.no_grad():
        out = model(*inputs)
    torch.cuda.synchronize()
    ok, max_err = _compare(out, ref, problem.tol("fp32"))
    row: dict[str, Any] = {"problem": pid, "status": "ok" if ok else "mismatch", "max_abs_err": max_err}
    if ok:
        row["time"] = _time(model, inputs, budget_s)
    return row


def worker(args: argparse.Namespace) -> None:
    """One batch: append one JSON line per problem to OUT/BATCH.jsonl (errors recorded, not raised)."""
    out = Path(args.out) / f"{args.worker}.jsonl"
    for pid in parse_ids(args.problems):
        t0 = time.perf_counter()
        try:
            if args.worker == "baseline":
                row = run_baseline(pid, args.budget_s, not args.no_compile)
            else:
                row = run_solution(args.worker, pid, args.budget_s)
        except Exception as exc:  # a failing solution is a result, the batch goes on
            row = {"problem": pid, "status": "error", "error": f"{type(exc).__name__}: {exc}"[-2000:]}
            traceback.print_exc()
        row["seconds"] = round(time.perf_counter() - t0, 2)
        with out.open("a") as fh:
            fh.write(json.dumps(row) + "\n")
        print(f"[{args.worker}] {pid}: {row.get('status', 'ok')} {row['seconds']} s", flush=True)


def warm(args: argparse.Namespace) -> None:
    """Phase-1 job: build/JIT one solution, or compile one reference, so the timing phase hits caches."""
    import torch

    kind, pid = args.warm.split(":")
    if kind == "compile":
        _, model, inputs = _setup(int(pid))
        with torch.no_grad():
            torch.compile(model)(*inputs)
    else:
        path = solution_path(kind, int(pid))
        assert path is not None
        module = _import(path)
        if kind == "triton":
            _, model, inputs = _setup(int(pid), module.ModelNew)
            with torch.no_grad():
                model(*inputs)
    torch.cuda.synchronize()


# ---------------------------------------------------------------- host side


def _env() -> dict[str, str]:
    env = dict(os.environ)
    cache = Path(tempfile.gettempdir()) / "kbench-solutions-cache"  # builds stay out of the results folder
    env.setdefault("TORCH_EXTENSIONS_DIR", str(cache / "torch_extensions"))
    env.setdefault("TORCHINDUCTOR_CACHE_DIR", str(cache / "inductor"))
    env.setdefault("TRITON_CACHE_DIR", str(cache / "triton"))
    env.setdefault("MAX_JOBS", "2")  # one .cu and one .cpp per extension
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _sub(argv: list[str], env: dict[str, str], timeout_s: float, log: Path) -> int:
    cmd = [sys.executable, str(Path(__file__).resolve()), *argv]
    with log.open("a") as fh:
        try:
            return subprocess.run(
                cmd, env=env, stdout=fh, stderr=subprocess.STDOUT, timeout=timeout_s
            ).returncode
        except subprocess.TimeoutExpired:
            fh.write(f"\n[timeout after {timeout_s} s]\n")
            return -9


def phase_warm(args: argparse.Namespace, ids: list[int], env: dict[str, str]) -> dict[str, Any]:
    jobs = [f"{b}:{i}" for b in args.backends for i in ids if solution_path(b, i)]
    if not args.no_compile:
        jobs += [f"compile:{i}" for i in ids]
    jobs.sort(key=lambda j: j.startswith("compile"))  # CUDA builds are the long pole: start them first
    out = Path(args.out)
    (out / "logs").mkdir(exist_ok=True)

    def one(job: str) -> tuple[str, int, float]:
        t0 = time.perf_counter()
        rc = _sub(
            ["--warm", job, "--out", args.out], env, args.warm_timeout_s, out / "logs" / f"warm_{job}.log"
        )
        return job, rc, round(time.perf_counter() - t0, 1)

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        done = list(pool.map(one, jobs))
    failed = {job: rc for job, rc, _ in done if rc != 0}
    print(f"warm-up: {len(jobs)} jobs, {len(failed)} failed: {sorted(failed)}", flush=True)
    return {job: {"rc": rc, "seconds": s} for job, rc, s in done}


def _read_rows(path: Path) -> dict[int, dict[str, Any]]:
    if not path.exists():
        return {}
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {r["problem"]: r for r in rows}


def phase_time(args: argparse.Namespace, batch: str, ids: list[int], env: dict[str, str]) -> None:
    """Run one batch; if its process dies mid-problem, record that problem as crashed and resume after it."""
    out = Path(args.out)
    path = out / f"{batch}.jsonl"
    deadline = time.monotonic() + args.batch_timeout_s
    while True:
        done = _read_rows(path)
        todo = [i for i in ids if i not in done]
        left = deadline - time.monotonic()
        if not todo or left <= 0:
            break
        argv = ["--worker", batch, "--out", args.out, "--problems", ",".join(map(str, todo))]
        argv += ["--budget-s", str(args.budget_s)] + (["--no-compile"] if args.no_compile else [])
        rc = _sub(argv, env, left, out / "logs" / f"{batch}.log")
        if rc == 0:
            break
        crashed = [i for i in todo if i not in _read_rows(path)][:1]
        with path.open("a") as fh:
            for i in crashed:
                fh.write(
                    json.dumps({"problem": i, "status": "crashed", "error": f"worker exit code {rc}"}) + "\n"
                )


def _geomean(xs: list[float]) -> float | None:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def _ms(row: dict[str, Any] | None, key: str) -> float | None:
    value = (row or {}).get(key)
    return value["median_ms"] if isinstance(value, dict) else None


def build_table(ids: list[int], rows: dict[str, dict[int, dict[str, Any]]]) -> list[dict[str, Any]]:
    table = []
    for pid in ids:
        base = rows["baseline"].get(pid, {})
        eager, comp, sol = _ms(base, "eager"), _ms(base, "compile"), base.get("sol_ms")
        entry: dict[str, Any] = {"problem": pid, "name": base.get("name", ""), "tags": base.get("tags", [])}
        entry.update({"eager_ms": eager, "compile_ms": comp, "sol_ms": sol, "bound": base.get("bound")})
        entry["baseline_error"] = base.get("error")
        for b in rows:
            if b == "baseline":
                continue
            r = rows[b].get(pid, {"status": "not run"})
            ms = _ms(r, "time")
            entry[b] = {
                "status": r.get("status", "ok"),
                "ms": ms,
                "vs_eager": eager / ms if ms and eager else None,
                "vs_compile": comp / ms if ms and comp else None,
                "sol_fraction": sol / ms if ms and sol else None,
                "error": r.get("error"),
            }
        table.append(entry)
    return table


def summarize(table: list[dict[str, Any]], backends: list[str]) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for b in backends:
        ok = [e for e in table if e[b]["vs_eager"] and e["compile_ms"]]
        mem = sorted(e[b]["sol_fraction"] for e in ok if e["bound"] == "memory" and e[b]["sol_fraction"])
        summary[b] = {
            "solved": len([e for e in table if e[b]["status"] == "ok"]),
            "timed_with_compile": len(ok),
            "geomean_vs_eager": _geomean([e[b]["vs_eager"] for e in ok]),
            "compile_geomean_vs_eager": _geomean([e["eager_ms"] / e["compile_ms"] for e in ok]),
            "geomean_vs_compile": _geomean([e[b]["vs_compile"] for e in ok]),
            "median_sol_fraction_memory_bound": mem[len(mem) // 2] if mem else None,
            "failed": {e["problem"]: e[b]["status"] for e in table if e[b]["status"] != "ok"},
        }
    return summary


def _f(x: float | None, fmt: str = "{:.3f}") -> str:
    return "-" if x is None else fmt.format(x)


def markdown(table: list[dict[str, Any]], summary: dict[str, Any], backends: list[str], meta: dict) -> str:
    lines = [
        f"# Level-2 solutions on {meta.get('gpu')}",
        "",
        f"{meta['date']}; torch {meta['torch']}, "
        f"triton {meta['triton']}, CUDA {meta['cuda']}. Times are medians in ms (kbench.timing, L2 "
        "flushed); speedups are eager/solution and compile/solution; SOL is the roofline time.",
        "",
    ]
    head = "| problem | bound | eager | compile | SOL |"
    sep = "|---|---|---|---|---|"
    for b in backends:
        head += f" {b} | {b} vs eager | {b} vs compile | {b} % SOL |"
        sep += "---|---|---|---|"
    lines += [head, sep]
    for e in table:
        cells = [
            f"{e['problem']}_{e['name']}",
            e["bound"] or "-",
            _f(e["eager_ms"]),
            _f(e["compile_ms"]),
            _f(e["sol_ms"], "{:.4f}"),
        ]
        for b in backends:
            r = e[b]
            time_cell = _f(r["ms"]) if r["status"] == "ok" else r["status"]
            cells += [
                time_cell,
                _f(r["vs_eager"], "{:.2f}x"),
                _f(r["vs_compile"], "{:.2f}x"),
                _f(r["sol_fraction"] and 100 * r["sol_fraction"], "{:.0f}%"),
            ]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "## Summary", ""]
    for b, s in summary.items():
        lines.append(
            f"- {b}: {s['solved']} correct; over the {s['timed_with_compile']} problems timed with "
            f"both baselines, geomean speedup vs eager {_f(s['geomean_vs_eager'], '{:.2f}x')} "
            f"(torch.compile: {_f(s['compile_geomean_vs_eager'], '{:.2f}x')}), vs compile "
            f"{_f(s['geomean_vs_compile'], '{:.2f}x')}; median fraction of SOL on memory-bound "
            f"problems {_f(s['median_sol_fraction_memory_bound'] and 100 * s['median_sol_fraction_memory_bound'], '{:.0f}%')}"
            f"; not ok: {s['failed'] or 'none'}"
        )
    return "\n".join(lines) + "\n"


def machine() -> dict[str, Any]:
    import torch

    meta: dict[str, Any] = {"date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")}
    meta["torch"], meta["cuda"] = torch.__version__, torch.version.cuda
    meta["gpu"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    try:
        import triton

        meta["triton"] = triton.__version__
    except ImportError:
        meta["triton"] = None
    meta["python"], meta["cpus"] = sys.version.split()[0], os.cpu_count()
    return meta


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--problems", default="1-36")
    ap.add_argument("--backends", default=",".join(BACKENDS))
    ap.add_argument("--budget-s", type=float, default=0.5, help="timing budget per mode and problem")
    ap.add_argument("--jobs", type=int, default=min(16, os.cpu_count() or 1))
    ap.add_argument("--warm-timeout-s", type=float, default=240.0)
    ap.add_argument("--batch-timeout-s", type=float, default=150.0)
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile baseline")
    ap.add_argument("--worker", choices=BATCHES, help=argparse.SUPPRESS)
    ap.add_argument("--warm", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args)
    if args.warm:
        return warm(args)
    args.backends = [b for b in args.backends.split(",") if b]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    ids, env, t0 = parse_ids(args.problems), _env(), time.perf_counter()
    warmed = phase_warm(args, ids, env)
    for batch in ["baseline", *args.backends]:
        phase_time(args, batch, ids, env)
    rows = {b: _read_rows(out / f"{b}.jsonl") for b in ["baseline", *args.backends]}
    table = build_table(ids, rows)
    summary, meta = summarize(table, args.backends), machine()
    meta["seconds"] = round(time.perf_counter() - t0, 1)
    report = {"meta": meta, "summary": summary, "table": table, "warm": warmed}
    (out / "results.json").write_text(json.dumps(report, indent=1, default=str))
    (out / "solutions.md").write_text(markdown(table, summary, args.backends, meta))
    print(json.dumps({"summary": summary, "seconds": meta["seconds"]}, indent=1, default=str))


if __name__ == "__main__":
    main()
