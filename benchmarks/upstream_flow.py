"""KernelBench's own evaluation flow, emulated on the throughput batch's files, for a side-by-side figure.

    python benchmarks/upstream_flow.py --out OUT [--variants 3] [--solutions N] [--limit 24] [--builders 16] [--max-seconds S]

The flow as the throughput issue describes it: a pool of CPU builders compiles every candidate's
load_inline extension (torch's plain JIT build into one fresh extensions folder, no kbench recipe), then
each candidate is evaluated on the GPU one at a time, each in a fresh Python process: the reference
`Model` and the candidate's `ModelNew` built under one seed, 5 correctness trials (inputs drawn under a
seed per trial, outputs compared with atol = rtol = 1e-2), then 3 warm-up calls and 100 timed calls,
each between two CUDA events and followed by a synchronize. Problem sizes are kbench's for `--preset`.

Reports the build time per candidate, the evaluation time per candidate (process start included), the
wall time of the whole flow, seconds per verdict and verdicts per minute, and each candidate's
correctness. With `--max-seconds` no evaluation starts after that time and the figures cover the
evaluations that finished, plus a whole-batch projection (the mean evaluation time for each one left).
Writes OUT/upstream_flow.jsonl (one row per build and per evaluation as it finishes),
OUT/upstream_flow.json and OUT/upstream_flow.md. `--device cpu` with the cpp solutions is a dry run.
Once both flows have run, `--out OUT --compare THROUGHPUT_OUT/throughput.json` writes OUT/side_by_side.md:
seconds per verdict of each, their ratio, and the candidates whose verdicts differ.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

CORRECTNESS_TRIALS = 5
WARMUP_CALLS = 3
TIMED_CALLS = 100
TOLERANCE = 1e-2


def _exec_candidate(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(f"upstream_candidate_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # a load_inline candidate builds (or loads) its extension here
    return module


def child_build(cand: Path) -> dict[str, Any]:
    t0 = time.perf_counter()
    _exec_candidate(cand)
    return {"build_s": round(time.perf_counter() - t0, 2)}


def child_eval(problem_key: str, preset: str, cand: Path, device_name: str) -> dict[str, Any]:
    import torch

    from kbench.problems import build_model, get_problem, load
    from kbench.problems.inputs import flatten_outputs

    device = torch.device(device_name)
    loaded = load(get_problem(problem_key), preset)
    torch.set_grad_enabled(False)
    ref = build_model(loaded, 42).to(device)
    module = _exec_candidate(cand)
    torch.manual_seed(42)
    init = loaded.get_init_inputs()
    torch.manual_seed(42)
    new = module.ModelNew(*init).to(device)

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize()

    def inputs(seed: int) -> list[Any]:
        torch.manual_seed(seed)
        return [x.to(device) if isinstance(x, torch.Tensor) else x for x in loaded.get_inputs()]

    row: dict[str, Any] = {"correct": True, "max_diff": 0.0}
    for trial in range(CORRECTNESS_TRIALS):
        xs = inputs(trial)
        want, got = flatten_outputs(ref(*xs)), flatten_outputs(new(*xs))
        sync()
        if len(want) != len(got) or any(a.shape != b.shape for a, b in zip(want, got, strict=False)):
            return row | {"correct": False, "why": "output shape"}
        for a, b in zip(want, got, strict=True):
            row["max_diff"] = max(row["max_diff"], float((a.float() - b.float()).abs().max()))
            if not torch.allclose(a, b, atol=TOLERANCE, rtol=TOLERANCE):
                return row | {"correct": False, "why": "values"}
    xs = inputs(0)
    for _ in range(WARMUP_CALLS):
        new(*xs)
    sync()
    times = []
    for _ in range(TIMED_CALLS):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            new(*xs)
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            new(*xs)
            times.append((time.perf_counter() - t0) * 1e3)
    row["mean_ms"] = float(f"{statistics.fmean(times):.3g}")  # 3 significant digits, as upstream reports
    return row


def _child(args: list[str], env: dict[str, str], timeout: float) -> tuple[dict[str, Any], float]:
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:g} s"}, time.perf_counter() - t0
    seconds = time.perf_counter() - t0
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"error": (proc.stderr or proc.stdout)[-600:]}, seconds
    return json.loads(lines[-1]), seconds


def run_flow(
    jobs: list[Any],
    out: Path,
    builders: int,
    device: str,
    preset: str,
    timeout: float,
    max_seconds: float | None = None,
) -> dict[str, Any]:
    """Build every candidate, then evaluate them one at a time; no evaluation starts after `max_seconds`
    (the result then covers those that finished: `cut` says how many were left)."""
    work = out / "work"
    work.mkdir(parents=True, exist_ok=True)
    files = []
    for job in jobs:
        path = work / f"cand_{job.tag}.py"
        path.write_text(job.candidate.source)
        files.append(path)
    with (
        tempfile.TemporaryDirectory(prefix="upstream-ext-", ignore_cleanup_errors=True) as extensions,
        (out / "upstream_flow.jsonl").open("a") as log,
    ):
        env = dict(os.environ, TORCH_EXTENSIONS_DIR=extensions, PYTHONPATH=os.pathsep.join(sys.path))
        t0 = time.perf_counter()

        def child(kind: str, i: int, args: list[str]) -> dict[str, Any]:
            """One build or evaluation of candidate i in its own process, its row logged as it finishes."""
            row, seconds = _child(["--child", kind, "--cand", str(files[i]), *args], env, timeout)
            row |= {
                "kind": kind,
                "tag": jobs[i].tag,
                "problem": jobs[i].problem.key,
                "wall_s": round(seconds, 2),
                "done_at": round(time.perf_counter() - t0, 2),
            }
            log.write(json.dumps(row) + "\n")
            log.flush()
            return row

        with ThreadPoolExecutor(max_workers=builders) as pool:
            builds = list(pool.map(lambda i: child("build", i, []), range(len(jobs))))
        built_at = time.perf_counter() - t0
        evals = []
        for i, job in enumerate(jobs):
            if max_seconds is not None and time.perf_counter() - t0 > max_seconds:
                break
            evals.append(
                child("eval", i, ["--problem", job.problem.key, "--preset", preset, "--device", device])
            )
        wall = time.perf_counter() - t0
    return {
        "builds": builds,
        "evals": evals,
        "built_at_s": round(built_at, 1),
        "wall_s": round(wall, 1),
        "cut": len(jobs) - len(evals),
    }


def summarize(res: dict[str, Any]) -> dict[str, Any]:
    b = [r["wall_s"] for r in res["builds"] if "error" not in r]
    e = [r["wall_s"] for r in res["evals"]]
    n = len(res["evals"])
    cut = res.get("cut", 0)
    # a cut run built every candidate but evaluated n of them: its whole-batch time is projected with the
    # mean evaluation time for those left, which credits the upstream flow (builds are its cheap part)
    projected = (res["wall_s"] + cut * statistics.mean(e)) / (n + cut) if cut and e else None
    return {
        "candidates": n,
        "builds_ok": len(b),
        "build_s": {"median": round(statistics.median(b), 1), "min": min(b), "max": max(b)} if b else None,
        "all_built_after_s": res["built_at_s"],
        "eval_s": {"median": round(statistics.median(e), 1), "min": min(e), "max": max(e)} if e else None,
        "correct": sum(bool(r.get("correct")) for r in res["evals"]),
        "errors": sum("error" in r for r in res["evals"]),
        "not_evaluated_after_max_seconds": res.get("cut", 0),
        "wall_s": res["wall_s"],
        "seconds_per_verdict": round(res["wall_s"] / n, 2) if n else None,
        "verdicts_per_min": round(60 * n / res["wall_s"], 1) if n else None,
        "projected_seconds_per_verdict": round(projected, 2) if projected else None,
    }


def side_by_side(upstream: dict[str, Any], kbench: dict[str, Any]) -> dict[str, Any]:
    """The two flows on the same files: seconds per verdict (kbench's cold pass over its whole batch, the
    upstream flow over its sample), their ratio, and whether they agree on each candidate both judged
    (kbench `ok` against upstream's correctness)."""
    ours = {v["tag"]: v["status"] for v in kbench["cold"]["verdicts"]}
    theirs = {r["tag"]: bool(r.get("correct")) for r in upstream["evals"] if "error" not in r}
    both = sorted(set(ours) & set(theirs))
    differ = [t for t in both if (ours[t] == "ok") != theirs[t]]
    k_spv = kbench["summary"]["seconds_per_verdict"]
    summary = summarize(upstream)
    u_spv = summary["projected_seconds_per_verdict"] or summary["seconds_per_verdict"]
    return {
        "kbench_seconds_per_verdict": k_spv,
        "upstream_seconds_per_verdict": u_spv,
        "speedup": round(u_spv / k_spv, 2) if k_spv and u_spv else None,
        "candidates_judged_by_both": len(both),
        "verdicts_that_differ": [
            {"tag": t, "kbench": ours[t], "upstream_correct": theirs[t]} for t in differ
        ],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--child", choices=["build", "eval"], default=None, help=argparse.SUPPRESS)
    ap.add_argument("--cand", type=Path, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--problem", default="", help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--variants", type=int, default=3)
    ap.add_argument("--solutions", type=int, default=0, help="the first N shipped solutions (0: all)")
    ap.add_argument("--limit", type=int, default=24, help="the first N candidates of the batch (0: all)")
    ap.add_argument("--builders", type=int, default=16)
    ap.add_argument("--device", default="cuda", help="cpu: a dry run with the cpp solutions, small preset")
    ap.add_argument("--preset", default="")
    ap.add_argument("--timeout", type=float, default=600.0, help="per build or evaluation process")
    ap.add_argument("--max-seconds", type=float, default=None, help="no evaluation starts after this")
    ap.add_argument(
        "--compare", type=Path, default=None, help="throughput.py's throughput.json: add a side-by-side table"
    )
    args = ap.parse_args()
    if args.child == "build":
        print(json.dumps(child_build(args.cand)))
        return
    if args.child == "eval":
        print(json.dumps(child_eval(args.problem, args.preset, args.cand, args.device)))
        return
    if args.out is None:
        ap.error("--out is required")
    if args.compare is not None and (args.out / "upstream_flow.json").exists():
        # both flows have run: only the side-by-side table (OUT/side_by_side.{json,md})
        upstream = json.loads((args.out / "upstream_flow.json").read_text())
        both = side_by_side(upstream, json.loads(args.compare.read_text()))
        (args.out / "side_by_side.json").write_text(json.dumps(both, indent=1))
        rows = [f"| {k} | {json.dumps(v)} |" for k, v in both.items()]
        table = [
            "# kbench and the upstream flow on the same files",
            "",
            "| measure | value |",
            "| --- | --- |",
        ]
        (args.out / "side_by_side.md").write_text("\n".join(table + rows) + "\n")
        print(json.dumps(both, indent=1))
        return
    from throughput import batch

    from kbench.hardware import environment

    gpu = args.device != "cpu"
    preset = args.preset or ("full" if gpu else "small")
    jobs = batch(args.variants, args.limit, "cuda" if gpu else "cpp", args.solutions)
    args.out.mkdir(parents=True, exist_ok=True)
    env = environment()
    res = run_flow(jobs, args.out, args.builders, args.device, preset, args.timeout, args.max_seconds)
    summary = summarize(res)
    (args.out / "upstream_flow.json").write_text(json.dumps({"env": env, "summary": summary} | res, indent=1))
    lines = [
        "# The upstream evaluation flow on the throughput batch's files",
        "",
        f"{env.get('gpu') or 'no GPU'} x{env.get('gpu_count') or 0}, {len(os.sched_getaffinity(0))} of "
        f"{env.get('cpu_count')} "
        f"CPUs, torch {env.get('torch')}, nvcc {env.get('nvcc')}, Python {env.get('python')}, "
        f"{dt.date.today().isoformat()}.",
        f"Command: `python benchmarks/upstream_flow.py --variants {args.variants} --limit {args.limit} "
        + (f"--solutions {args.solutions} " if args.solutions else "")
        + f"--builders {args.builders} --device {args.device}"
        + (f" --max-seconds {args.max_seconds:g}" if args.max_seconds is not None else "")
        + f"` (preset {preset})",
        "",
        "| measure | value |",
        "| --- | --- |",
        *[f"| {k} | {json.dumps(v) if isinstance(v, dict) else v} |" for k, v in summary.items()],
        "",
    ]
    (args.out / "upstream_flow.md").write_text("\n".join(lines))
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
