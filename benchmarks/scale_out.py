"""Scale-out on one CPU machine: `kbench serve` fed by 1, 2, ... lanes, local or through Ray.

    python benchmarks/scale_out.py --out OUT [--lanes 1,2] [--executors local,ray] [--jobs 24] [--hangs 1]

For each executor and lane count a service is started here on 127.0.0.1 (CPU, cpp, small preset, no
timing, `--cpu-lanes K`; `--executor ray` starts a local Ray cluster of this machine's cores, whose lane
actors are the evaluation hosts). A warm-up batch of the same shape builds the C++ extension, runs the
reference and starts every lane; then the measured batch is submitted at once: `--hangs` hanging
candidates first (each holds its lane until the
phase budget, `--timeout-s`) and `--jobs` honest ones (each a distinct candidate, one shared build), and
every verdict is awaited. Reported per run: the batch's wall time, honest verdicts per minute, scaling
efficiency against the same executor on one lane (rate_k / (k x rate_1)), the wait for the first honest
verdict (with one lane it comes after a hang's budget), and whether every job got the verdict its kind
must (honest `ok`, hanging `timeout`), none lost.

Writes OUT/scale_out.json and OUT/scale_out.md; `--record` files it under results/<hardware>/scale-out.jsonl.
"""

from __future__ import annotations

import argparse
import json
import signal
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import common
from soak import TOKEN, _source


def batch(url: str, kinds: list[str], tag: str) -> tuple[list[str], dict[str, tuple[str, float]], float]:
    """Submit one candidate per kind at once and await each: the job ids, each job's (status, seconds
    from the submission to its end) and the batch's wall time."""
    from kbench.client import Client

    items = [{"problem": "2/1", "source": _source(k, f"{tag}-{i}", 0)} for i, k in enumerate(kinds)]
    with Client(url, token=TOKEN, timeout=300) as client:
        t0 = time.perf_counter()
        ids = [item.job.id for item in client.submit_many(items) if item.job is not None]
    done: dict[str, tuple[str, float]] = {}

    def await_one(job_id: str) -> None:  # each job's own client: its end is seen when it comes
        with Client(url, token=TOKEN, timeout=300) as own:
            job = own.wait(job_id, timeout=600)
        verdict = job.typed_verdict()
        done[job_id] = (verdict.status.value if verdict else job.state.value, time.perf_counter() - t0)

    waiters = [threading.Thread(target=await_one, args=(job_id,)) for job_id in ids]
    for w in waiters:
        w.start()
    for w in waiters:
        w.join()
    return ids, done, time.perf_counter() - t0


def one_run(executor: str, lanes: int, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    flags = ["--store", str(work / f"{executor}-{lanes}.db"), "--run", "scale", "--device", "cpu",
             "--backend", "cpp", "--preset", "small", "--no-timing", "--max-queue", "1024",
             "--cpu-lanes", str(lanes), "--executor", executor]  # fmt: skip
    env = {"KBENCH_CACHE_DIR": str(work / "cache"), "KBENCH_SERVE_TOKEN": TOKEN,
           "KBENCH_TIMEOUT_S": str(args.timeout_s), "KBENCH_STATIC_CHECKS": "false",
           "RAY_USAGE_STATS_ENABLED": "0"}  # fmt: skip
    if executor == "ray":
        env["KBENCH_RAY_TMP"] = tempfile.mkdtemp(prefix="kr-")
    proc, url = common.start_service(flags, env)
    kinds = ["hang"] * args.hangs + ["honest"] * args.jobs
    try:
        batch(url, kinds, f"warm-{executor}-{lanes}")  # every lane up and warm (Ray starts one when needed)
        ids, done, wall = batch(url, kinds, f"{executor}-{lanes}")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=120)
    got = [(kind, *done[job_id]) for kind, job_id in zip(kinds, ids, strict=True)]
    honest = sorted(t for kind, _, t in got if kind == "honest")
    wrong = [
        f"{kind}: {status}" for kind, status, _ in got if status != ("ok" if kind == "honest" else "timeout")
    ]
    return {
        "executor": executor,
        "lanes": lanes,
        "jobs": len(kinds),
        "verdicts": len(done),
        "wall_s": wall,
        "honest_per_min": 60 * len(honest) / honest[-1] if honest else 0.0,
        "first_honest_s": honest[0] if honest else None,
        "wrong": wrong,
    }


def report(runs: list[dict[str, Any]], env: dict[str, Any], args: argparse.Namespace) -> str:
    base = {r["executor"]: r["honest_per_min"] for r in runs if r["lanes"] == 1}
    lines = [
        "# Scale-out of kbench serve on one CPU machine", "",
        f"{env['machine']}, torch {env['versions'].get('torch')}, python {env['versions'].get('python')}. "
        f"One batch per run: {args.hangs} hanging candidates (phase budget {args.timeout_s:g} s), then "
        f"{args.jobs} honest ones, of problem 2/1 (cpp, small preset, no timing, static checks off), after a "
        "warm-up batch of the same shape.", "",
        "| executor | lanes | wall s | honest verdicts/min | efficiency | first honest verdict s | verdicts | wrong |",
        "|---|---|---|---|---|---|---|---|",
    ]  # fmt: skip
    for r in runs:
        one = base.get(r["executor"])
        eff = f"{r['honest_per_min'] / (r['lanes'] * one):.2f}" if one else "-"
        first = f"{r['first_honest_s']:.1f}" if r["first_honest_s"] is not None else "-"
        lines.append(
            f"| {r['executor']} | {r['lanes']} | {r['wall_s']:.1f} | {r['honest_per_min']:.0f} | {eff} | {first} "
            f"| {r['verdicts']} of {r['jobs']} | {len(r['wrong'])} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--lanes", default="1,2")
    ap.add_argument("--executors", default="local,ray")
    ap.add_argument("--jobs", type=int, default=24)
    ap.add_argument("--hangs", type=int, default=1)
    ap.add_argument(
        "--timeout-s", type=float, default=5.0, help="the service's phase budget (hangs end here)"
    )
    common.add_record_argument(ap)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="kbench-scale-"))
    runs = []
    for executor in args.executors.split(","):
        for lanes in (int(k) for k in args.lanes.split(",")):
            runs.append(one_run(executor, lanes, args, work))
            print(json.dumps(runs[-1]), flush=True)
    env = common.environment()
    (args.out / "scale_out.json").write_text(json.dumps({"env": env, "runs": runs}, indent=1))
    markdown = report(runs, env, args)
    (args.out / "scale_out.md").write_text(markdown)
    print(markdown)
    metrics = {f"{r['executor']}_{r['lanes']}_per_min": round(r["honest_per_min"], 1) for r in runs}
    metrics["wrong"] = sum(len(r["wrong"]) for r in runs)
    common.record_markdown(
        args.record, "scale-out", markdown, metrics=metrics, artifacts=[args.out / "scale_out.json"]
    )


if __name__ == "__main__":
    main()
