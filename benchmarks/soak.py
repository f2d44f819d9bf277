"""A soak of `kbench serve` under adversarial traffic: many clients, a mix of honest, wrong, hanging,
crashing and log-flooding candidates, for minutes, loopback only.

    python benchmarks/soak.py --out OUT [--minutes 10] [--clients 16] [--think-s 0] [--cpu-lanes 0] [--record]

A service is started here on 127.0.0.1 (CPU, cpp, small preset, no timing: what a CPU machine serves;
`--cpu-lanes` its lanes, 0 its default: one per core without timing),
with a phase budget of `--timeout-s` so that a hanging candidate ends as `timeout`, and without the static
checks, so that the hanging and crashing candidates (plain Python) reach the runtime they attack. First the idle
latency: `--idle` honest candidates one after another from one client. Then `--clients` threads, each
submitting one candidate at a time (the mix below, each with an idempotency key), waiting for its
verdict and then pausing (exponentially distributed, `--think-s` on average: 0 keeps the service saturated,
so an honest job's latency is the queue's length; a pause sets the load a trainer offers), until
`--minutes` pass; every verdict is checked against what its kind must get (honest `ok`,
wrong `mismatch`, hanging `timeout`, crashing `crashed`, flooding `ok` with its log cut) and against its
own candidate (the digest). The service's resident memory (with its workers') is sampled every second.

Afterwards the run in the store must hold exactly one verdict per accepted job (none lost, none twice),
and the record says the honest jobs' latency under load against idle (target: within 2x), the memory at
the start and end of the load (target: flat), and any job that failed or got a wrong verdict.

Writes OUT/soak.json and OUT/soak.md; `--record` files the record under results/<hardware>/soak.jsonl.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import common

FIXTURES = common.ROOT / "tests" / "fixtures" / "eval"
TOKEN = "kbench-soak-token-0123456789"
# kind -> (fixture, weight, expected status)
MIX = {
    "honest": ("cpp_honest.py", 6, "ok"),
    "wrong": ("cpp_wrong.py", 3, "mismatch"),
    "hang": ("py_hang.py", 1, "timeout"),
    "crash": ("py_segfault.py", 1, "crashed"),
    "flood": ("cpp_honest.py", 1, "ok"),
}
FLOOD = "import os as _os\n_chunk = (b'x' * 1023 + b'\\n') * 1024\nfor _ in range({mib}):\n    _os.write(2, _chunk)\n"


def _source(kind: str, mark: str, flood_mib: int) -> str:
    fixture = MIX[kind][0]
    text = (FIXTURES / fixture).read_text()
    first = text.splitlines()[0]
    if first.startswith("# include:"):
        text = (FIXTURES / first.split(":", 1)[1].strip()).read_text() + "\n" + text
    if kind == "flood":
        head, sep, rest = text.partition("\nclass ModelNew")
        text = head + "\n" + FLOOD.format(mib=flood_mib) + sep + rest
    return f"{text}\n# {mark}\n"


def _rss_mib(pid: int) -> float:
    """Resident memory of `pid` and every process below it (the service and its workers), MiB."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        todo.extend(children.get(p, []))
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


def start(store: Path, cache: Path, timeout_s: float, lanes: int) -> tuple[subprocess.Popen[str], str]:
    flags = ["--store", str(store), "--run", "soak", "--device", "cpu", "--backend", "cpp", "--preset", "small",
             "--no-timing", "--max-queue", "1024", "--cpu-lanes", str(lanes)]  # fmt: skip
    env = {"KBENCH_CACHE_DIR": str(cache), "KBENCH_SERVE_TOKEN": TOKEN, "KBENCH_TIMEOUT_S": str(timeout_s),
           "KBENCH_STATIC_CHECKS": "false"}  # fmt: skip
    return common.start_service(flags, env)


class Soak:
    def __init__(self, url: str, args: argparse.Namespace) -> None:
        self.url, self.args = url, args
        self.lock = threading.Lock()
        self.jobs: dict[str, dict[str, Any]] = {}  # job id -> kind, digest, seconds, status
        self.problems: list[str] = []  # wrong verdicts, failed jobs, client errors
        self.submitted = 0

    def one(self, client: Any, kind: str, mark: str) -> None:
        import hashlib

        from kbench.client import ServiceError

        source = _source(kind, mark, self.args.flood_mib)
        t0 = time.perf_counter()
        try:
            items = client.submit_many([{"problem": "2/1", "source": source, "model": "soak",
                                         "idempotency_key": mark}])  # fmt: skip
            job = items[0].job
            if job is None:
                raise ServiceError(items[0].status, items[0].error or "")
            with self.lock:
                self.submitted += 1
            done = client.wait(job.id, timeout=self.args.timeout_s * 6 + 120)
        except Exception as exc:
            with self.lock:
                self.problems.append(f"{kind} {mark}: {type(exc).__name__}: {exc}")
            return
        seconds = time.perf_counter() - t0
        verdict = done.typed_verdict()
        status = (
            verdict.status.value if verdict is not None else f"no verdict ({done.state.value}: {done.error})"
        )
        digest = hashlib.sha256(source.encode()).hexdigest()[:16]
        with self.lock:
            self.jobs[job.id] = {"kind": kind, "seconds": seconds, "status": status, "mark": mark}
            if status != MIX[kind][2] or (verdict is not None and verdict.candidate_digest != digest):
                self.problems.append(
                    f"{kind} {mark}: got {status} (digest {verdict and verdict.candidate_digest})"
                )

    def idle(self) -> list[float]:
        from kbench.client import Client

        with Client(self.url, token=TOKEN) as client:
            for i in range(self.args.idle):
                self.one(client, "honest", f"idle-{i}")
        return [j["seconds"] for j in self.jobs.values() if j["mark"].startswith("idle-")]

    def load(self) -> None:
        from kbench.client import Client

        kinds = [k for k, (_, weight, _) in MIX.items() for _ in range(weight)]
        end = time.monotonic() + self.args.minutes * 60

        def client_loop(n: int) -> None:
            rng = random.Random(n)
            with Client(self.url, token=TOKEN, timeout=120) as client:
                i = 0
                while time.monotonic() < end:
                    self.one(client, rng.choice(kinds), f"c{n}-{i}")
                    i += 1
                    if self.args.think_s > 0:
                        time.sleep(
                            min(rng.expovariate(1 / self.args.think_s), max(0.0, end - time.monotonic()))
                        )

        threads = [threading.Thread(target=client_loop, args=(n,)) for n in range(self.args.clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--idle", type=int, default=8)
    ap.add_argument("--think-s", type=float, default=0.0, help="a client's mean pause between its jobs")
    ap.add_argument("--cpu-lanes", type=int, default=0, help="the service's CPU lanes (0: its default)")
    ap.add_argument(
        "--timeout-s", type=float, default=5.0, help="the service's phase budget (hangs end here)"
    )
    ap.add_argument("--flood-mib", type=int, default=200, help="what a flooding candidate writes at import")
    common.add_record_argument(ap)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="kbench-soak-"))
    store, cache = work / "kbench.db", work / "cache"
    proc, url = start(store, cache, args.timeout_s, args.cpu_lanes)
    soak = Soak(url, args)
    memory: list[tuple[float, float]] = []
    stop = threading.Event()

    def sample() -> None:
        t0 = time.monotonic()
        while not stop.wait(1.0):
            memory.append((time.monotonic() - t0, _rss_mib(proc.pid)))

    sampler = threading.Thread(target=sample, daemon=True)
    try:
        soak.one(__import__("kbench.client", fromlist=["Client"]).Client(url, token=TOKEN), "wrong", "warm")
        idle = soak.idle()
        sampler.start()
        load_t0 = time.monotonic()
        soak.load()
        load_s = time.monotonic() - load_t0
    finally:
        stop.set()
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=120)
    from kbench.store import Store

    with Store(store) as db:
        records = [r for r in db.records("soak") if r.key.model == "soak"]
    keys = [r.key for r in records]
    loaded = [j for j in soak.jobs.values() if not j["mark"].startswith(("idle-", "warm"))]
    honest = [j["seconds"] for j in loaded if j["kind"] == "honest"]
    by_kind = {k: sum(j["kind"] == k for j in loaded) for k in MIX}
    third = max(1, len(memory) // 3)
    start_mib = statistics.median(m for _, m in memory[:third]) if memory else 0.0
    end_mib = statistics.median(m for _, m in memory[-third:]) if memory else 0.0
    result = {
        "env": common.environment(),
        "settings": {k: v for k, v in vars(args).items() if k not in ("out", "record")},
        "idle_honest_s": idle,
        "load_s": load_s,
        "jobs_per_min": 60
        * sum(not j["mark"].startswith(("idle-", "warm")) for j in soak.jobs.values())
        / load_s,
        "submitted": soak.submitted,
        "verdicts": len(soak.jobs),
        "stored": len(records),
        "stored_unique": len(set(keys)),
        "by_kind": by_kind,
        "honest_median_s": statistics.median(honest) if honest else None,
        "honest_p90_s": sorted(honest)[int(0.9 * (len(honest) - 1))] if honest else None,
        "idle_median_s": statistics.median(idle) if idle else None,
        "memory_mib": memory,
        "memory_start_mib": start_mib,
        "memory_end_mib": end_mib,
        "problems": soak.problems,
    }
    (args.out / "soak.json").write_text(json.dumps(result, indent=1))
    markdown = report(result)
    (args.out / "soak.md").write_text(markdown)
    print(markdown)
    metrics = {k: result[k] for k in ("submitted", "verdicts", "stored", "stored_unique", "honest_median_s",
                                      "honest_p90_s", "idle_median_s", "jobs_per_min", "memory_start_mib",
                                      "memory_end_mib")}  # fmt: skip
    metrics["problems"] = len(soak.problems)
    common.record_markdown(args.record, "soak", markdown, metrics=metrics, artifacts=[args.out / "soak.json"])


def report(r: dict[str, Any]) -> str:
    env, s = r["env"], r["settings"]
    ratio = (r["honest_median_s"] or 0) / r["idle_median_s"] if r["idle_median_s"] else None
    lines = [
        "# A soak of kbench serve under adversarial traffic (cpu)", "",
        f"{env['machine']}, torch {env['versions'].get('torch')}, python {env['versions'].get('python')}. "
        f"{s['clients']} clients for {s['minutes']} min on 127.0.0.1, one candidate each at a time"
        + (f" and a pause of {s['think_s']:g} s on average after each" if s.get("think_s") else "")
        + f", the service on {s.get('cpu_lanes') or 'its default'} CPU lane(s): honest, "
        f"wrong, hanging (phase budget {s['timeout_s']} s), crashing and log-flooding ({s['flood_mib']} MiB) "
        "candidates of problem 2/1 (cpp, small preset, no timing, static checks off), weights 6/3/1/1/1.", "",
        "| measure | value |", "|---|---|",
        f"| jobs accepted under load and idle | {r['submitted']} |",
        f"| verdicts received | {r['verdicts']} |",
        f"| verdicts in the run (unique keys) | {r['stored']} ({r['stored_unique']}) |",
        f"| jobs by kind under load | {', '.join(f'{k} {v}' for k, v in r['by_kind'].items())} |",
        f"| jobs judged per minute under load | {r['jobs_per_min']:.0f} |",
        f"| honest latency idle, median s | {r['idle_median_s']:.2f} |" if r["idle_median_s"] else "| idle | - |",
        f"| honest latency under load, median / p90 s | {r['honest_median_s']:.2f} / {r['honest_p90_s']:.2f} |"
        if r["honest_median_s"] else "| under load | - |",
        f"| under load / idle | {ratio:.1f}x |" if ratio else "| under load / idle | - |",
        f"| service and workers' memory, first / last third of the load, MiB | {r['memory_start_mib']:.0f} / "
        f"{r['memory_end_mib']:.0f} |",
        f"| wrong verdicts, failed jobs, client errors | {len(r['problems'])} |",
    ]  # fmt: skip
    if r["problems"]:
        lines += ["", "Problems:", "", *[f"- {p}" for p in r["problems"][:20]]]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
