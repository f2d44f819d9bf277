"""Warm verdict latency through the library API and through `kbench serve`, and the rate with 8 clients.

    python benchmarks/service_latency.py --out OUT                                  # a GPU: Triton, full
    python benchmarks/service_latency.py --out OUT --device cpu --backend cpp --preset small --problems 2/23,2/24

Each problem's shipped solution (`--backend`) is judged:
- API: in this process by one `Evaluator`: once cold (builds, the reference run), then `--repeats` times
  warm; the latency of a verdict is the caller's wall time from `evaluate()` to its return.
- service: a `kbench serve` started here on 127.0.0.1 with the same settings, through `kbench.client`:
  once cold, then `--repeats` warm; the latency is the client's wall time from submit to the verdict.
  Its first verdict finds the API's builds and the fixed reference outputs in the shared cache folder.
- rate: `--clients` clients (8) each judging `--per-client` solutions in turn over the problems, at once;
  verdicts per second over the whole burst, and each verdict's latency under that load.
`--executor ray` runs both the API's Evaluator and the service on a local Ray (the path a cluster takes
with `kbench serve --executor ray --ray-address ADDR`).

A verdict's target is 3 s warm for outputs up to 256 MiB (the verdict-speed issue); problems whose
output is larger are skipped with a note (`--max-output-mib`). Writes OUT/service_latency.json and
OUT/service_latency.md (machine, versions, date, settings, one table per measurement).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import common

TARGET_S = 3.0


def _solutions(
    problems: list[str], backend: str, preset: str, max_mib: float
) -> tuple[dict[str, str], dict[str, float], list[str]]:
    """(problem key -> solution source, problem key -> output MiB, notes about skipped problems)."""
    from kbench.analysis.roofline import problem_flops
    from kbench.problems import get_problem
    from kbench.solutions import shipped_candidate as reference_candidate

    sources, sizes, notes = {}, {}, []
    for address in problems:
        problem = get_problem(address)
        candidate = reference_candidate(problem, backend)
        mib = round(problem_flops(problem, preset).output_bytes / 2**20, 1)
        if candidate is None:
            notes.append(f"{problem.key}: no shipped {backend} solution")
        elif mib > max_mib:
            notes.append(f"{problem.key}: output {mib} MiB > {max_mib} MiB, skipped")
        else:
            sources[problem.key], sizes[problem.key] = candidate.source, mib
    if not sources:
        raise SystemExit("no problem left to measure: " + "; ".join(notes))
    return sources, sizes, notes


def _summary(seconds: list[float]) -> dict[str, float]:
    ordered = sorted(seconds)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    return {"n": len(ordered), "median_s": round(statistics.median(ordered), 3), "p90_s": round(p90, 3),
            "max_s": round(ordered[-1], 3)}  # fmt: skip


def measure_api(sources: dict[str, str], args: argparse.Namespace, store: Path) -> dict[str, Any]:
    from kbench.api import Evaluator

    with Evaluator(_config(args, store)) as ev:
        rows = _cold_then_warm(ev.evaluate, sources, args)
        rows["_run"] = ev.run_id
    return rows


def _cold_then_warm(
    evaluate: Callable[..., Any], sources: dict[str, str], args: argparse.Namespace
) -> dict[str, Any]:
    """Each problem's solution judged once cold, then `--repeats` times warm; the caller's wall time of each."""
    rows: dict[str, Any] = {}
    for key, source in sources.items():
        t0 = time.perf_counter()
        cold = evaluate(key, source, args.backend)
        cold_s = time.perf_counter() - t0
        warm, statuses = [], set()
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            verdict = evaluate(key, source, args.backend)
            warm.append(time.perf_counter() - t0)
            statuses.add(verdict.status.value)
        rows[key] = {"cold_s": round(cold_s, 3), "cold_status": cold.status.value,
                     "statuses": sorted(statuses), **_summary(warm)}  # fmt: skip
    return rows


def _config(args: argparse.Namespace, store: Path) -> Any:
    from kbench.config import resolve

    flags = {"device": args.device, "backend": args.backend, "preset": args.preset, "store": store,
             "cache_dir": args.cache, "measure": False if args.no_timing else None,
             "executor": args.executor}  # fmt: skip
    return resolve(None, flags)


def start_service(args: argparse.Namespace, store: Path) -> tuple[subprocess.Popen[str], str]:
    flags = ["--store", str(store), "--device", args.device, "--backend", args.backend, "--preset", args.preset,
             "--max-queue", "1024", "--executor", args.executor,
             *(["--no-timing"] if args.no_timing else [])]  # fmt: skip
    return common.start_service(flags, {"KBENCH_CACHE_DIR": str(args.cache)})


def measure_service(sources: dict[str, str], args: argparse.Namespace, url: str) -> dict[str, Any]:
    from kbench.client import Client

    with Client(url) as client:
        rows = _cold_then_warm(client.evaluate, sources, args)
        rows["_run"] = client.health().run_id
    return rows


def measure_rate(sources: dict[str, str], args: argparse.Namespace, url: str) -> dict[str, Any]:
    """`clients` threads, each with its own client, judging `per_client` solutions back to back."""
    from kbench.client import Client

    keys = list(sources)
    latencies: list[float] = []
    statuses: dict[str, int] = {}
    lock = threading.Lock()

    def one(n: int) -> None:
        with Client(url) as client:
            for i in range(args.per_client):
                key = keys[(n + i) % len(keys)]
                t0 = time.perf_counter()
                status = client.evaluate(key, sources[key], args.backend).status.value
                with lock:
                    latencies.append(time.perf_counter() - t0)
                    statuses[status] = statuses.get(status, 0) + 1

    threads = [threading.Thread(target=one, args=(n,)) for n in range(args.clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    total = len(latencies)
    return {"clients": args.clients, "verdicts": total, "wall_s": round(wall, 2),
            "per_second": round(total / wall, 3), "per_minute": round(60 * total / wall, 1),
            "statuses": statuses, "latency": _summary(latencies)}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--problems", default="2/1,2/23")
    ap.add_argument("--backend", default="triton")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--preset", default="full")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--per-client", type=int, default=8)
    ap.add_argument("--max-output-mib", type=float, default=256.0)
    ap.add_argument("--no-timing", action="store_true", help="correctness and protocol only")
    ap.add_argument("--executor", default="local", help="local | ray (a local Ray; scale-out's path)")
    ap.add_argument("--cache", type=Path, default=Path(tempfile.mkdtemp(prefix="kbench-service-cache-")))
    common.add_record_argument(ap)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    from kbench.hardware import environment

    sources, sizes, notes = _solutions(
        args.problems.split(","), args.backend, args.preset, args.max_output_mib
    )
    local = ("out", "cache", "record")  # paths of this machine, not settings of the measurement
    kept = {k: str(v) for k, v in vars(args).items() if k not in local}
    result: dict[str, Any] = {"args": kept, "env": environment(), "load_avg": [round(x, 2) for x in os.getloadavg()],
                              "date": common.utc_now(),
                              "output_mib": sizes, "notes": notes}  # fmt: skip
    store = args.cache / "service_latency.db"  # the runs' ids are in the JSON; `kbench report` reads them
    result["api"] = measure_api(sources, args, store)
    proc, url = start_service(args, store)
    try:
        result["service"] = measure_service(sources, args, url)
        result["rate"] = measure_rate(sources, args, url)
    finally:
        proc.terminate()
        proc.communicate(timeout=60)
    (args.out / "service_latency.json").write_text(json.dumps(result, indent=1, default=str))
    (args.out / "service_latency.md").write_text(report(result))
    print(report(result))
    artifacts = [args.out / "service_latency.json"]
    common.record_markdown(args.record, "service-latency", report(result), artifacts=artifacts)


def report(result: dict[str, Any]) -> str:
    env, args = result["env"], result["args"]
    flags = " ".join(
        f"--{k.replace('_', '-')} {v}"
        for k, v in args.items()
        if k not in ("out", "cache") and v not in ("False", "")
    )
    lines = [f"# Warm verdict latency: library API and `kbench serve` ({result['date']})", "",
             f"kbench {env.get('kbench')}, torch {env.get('torch')}, triton {env.get('triton')}, python "
             f"{env.get('python')}; {env.get('cpu')} x {env.get('cpu_count')}; gpu {env.get('gpu')}, driver "
             f"{env.get('driver')}; load average at the start {result.get('load_avg')}", "",
             f"`python benchmarks/service_latency.py {flags}`", "",
             f"Target: a warm verdict in {TARGET_S:.0f} s or less for outputs up to 256 MiB.", ""]  # fmt: skip
    lines += [f"- {note}" for note in result["notes"]] + ([""] if result["notes"] else [])
    lines += ["| problem | out MiB | path | cold s | warm median s | p90 s | max s | n | verdicts | within target |",
              "|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for path in ("api", "service"):
        for key, row in result[path].items():
            if key.startswith("_"):
                continue
            within = "yes" if row["max_s"] <= TARGET_S else "no"
            lines.append(f"| {key} | {result['output_mib'][key]} | {path} | {row['cold_s']} | {row['median_s']} | "
                         f"{row['p90_s']} | {row['max_s']} | {row['n']} | {', '.join(row['statuses'])} | {within} |")  # fmt: skip
    rate = result["rate"]
    lat = rate["latency"]
    lines += ["", f"## Sustained rate, {rate['clients']} clients of the service", "",
              "| verdicts | wall s | verdicts/s | verdicts/min | latency median s | p90 s | max s | statuses |",
              "|---|---|---|---|---|---|---|---|",
              f"| {rate['verdicts']} | {rate['wall_s']} | {rate['per_second']} | {rate['per_minute']} | "
              f"{lat['median_s']} | {lat['p90_s']} | {lat['max_s']} | "
              f"{', '.join(f'{k} {v}' for k, v in sorted(rate['statuses'].items()))} |", ""]  # fmt: skip
    return "\n".join(lines)


if __name__ == "__main__":
    main()
