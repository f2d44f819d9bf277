"""Multi-GPU scaling: the throughput batch through the local executor and through Ray on 1, 2, 4, 8 GPUs.

    python benchmarks/scaling.py --out OUT [--gpus 1,2,4,8] [--executors local,ray] [--variants 1]

For each executor and GPU count k (counts above the machine's GPUs are skipped) the batch of
benchmarks/throughput.py (every shipped CUDA level-2 solution, `--variants` renamed copies each so no build
is a cache hit) is evaluated on GPUs 0..k-1, eager baseline only: the local executor with its lanes and
CPU builders; Ray with a local cluster started here with k GPUs (one evaluation task per GPU). Builds are
made once first into a shared cache unless `--cold-builds` (then every run builds, and the CPUs show
where they become the limit). Reported per run: wall time, verdicts per minute, scaling efficiency
against the same executor on one GPU (rate_k / (k * rate_1)), each GPU's busy share (nvidia-smi, every
200 ms, over the run), the host CPUs' busy share (/proc/stat), and whether every candidate got the same
verdict in every run.

Writes OUT/scaling.jsonl (one row per run) and OUT/scaling.md.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import common
from throughput import batch

from kbench.api.runner import closed_batch
from kbench.config import RunConfig
from kbench.executors import Job, get_executor
from kbench.executors.local import default_builders, usable_cpus
from kbench.hardware import environment
from kbench.types import Verdict


class Busy:
    """Each GPU's utilization (nvidia-smi every 200 ms) and the host CPUs' busy share (/proc/stat)."""

    def __init__(self) -> None:
        self.gpu: dict[int, list[int]] = {}
        self.proc: subprocess.Popen[str] | None = None
        self.cpu0 = self._cpu()

    @staticmethod
    def _cpu() -> tuple[int, int]:
        fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
        idle = fields[3] + fields[4]
        return sum(fields) - idle, sum(fields)

    def start(self) -> None:
        cmd = [
            "nvidia-smi",
            "--query-gpu=index,utilization.gpu",
            "--format=csv,noheader,nounits",
            "-lms",
            "200",
        ]
        try:
            self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        except OSError:
            return
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            parts = [p.strip() for p in line.split(",")]
            if len(parts) == 2 and all(p.isdigit() for p in parts):
                self.gpu.setdefault(int(parts[0]), []).append(int(parts[1]))

    def stop(self, gpus: int) -> tuple[list[float | None], float]:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait()
        busy, total = self._cpu()
        cpu = (busy - self.cpu0[0]) / max(1, total - self.cpu0[1])
        shares = []
        for i in range(gpus):
            xs = self.gpu.get(i, [])
            shares.append(round(sum(u > 0 for u in xs) / len(xs), 3) if xs else None)
        return shares, round(cpu, 3)


def one_run(jobs: list[Job], cfg: RunConfig, executor: str, gpus: int) -> dict[str, Any]:
    devices = [f"cuda:{i}" for i in range(gpus)]
    if executor == "local":
        ex = get_executor("local", devices=devices, builders=cfg.builders, slots=cfg.gpu_slots)
    else:
        import ray

        if ray.is_initialized():
            ray.shutdown()
        ray.init(num_gpus=gpus, include_dashboard=False, _temp_dir=tempfile.mkdtemp(prefix="kbench-ray-"))
        ex = get_executor("ray", gpus_per_job=1.0)
    verdicts: dict[int, Verdict] = {}
    busy = Busy()
    busy.start()
    t0 = time.monotonic()
    stages, portable = closed_batch(cfg, jobs)
    ex.run(
        portable,
        stages.build,
        stages.evaluate,
        lambda job, v: verdicts.__setitem__(int(job.tag.ref), v),
        stages.prefetch,
    )
    wall = time.monotonic() - t0
    close = getattr(ex, "close", None)
    if close is not None:
        close()  # Ray's lanes live from the executor's first run to its close
    gpu_busy, cpu_busy = busy.stop(gpus)
    if executor == "ray":
        import ray

        ray.shutdown()
    return {
        "executor": executor,
        "gpus": gpus,
        "verdicts": len(verdicts),
        "wall_s": round(wall, 1),
        "per_min": round(60 * len(verdicts) / wall, 2),
        "gpu_busy": gpu_busy,
        "cpu_busy": cpu_busy,
        "statuses": {str(k): v.status.value for k, v in sorted(verdicts.items())},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--gpus", default="1,2,4,8")
    ap.add_argument("--executors", default="local,ray")
    ap.add_argument("--variants", type=int, default=1)
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--cold-builds", action="store_true")
    common.add_record_argument(ap)
    args = ap.parse_args()
    import torch

    have = torch.cuda.device_count()
    counts = [k for k in map(int, args.gpus.split(",")) if k <= have]
    if not counts:
        raise SystemExit(f"this machine has {have} GPUs; none of --gpus {args.gpus} can run")
    args.out.mkdir(parents=True, exist_ok=True)
    cache = Path(tempfile.mkdtemp(prefix="kbench-scaling-"))
    cfg = RunConfig(device="cuda", baselines=["eager"], cache_dir=cache, backend="cuda")
    jobs = batch(args.variants, args.limit)
    if not args.cold_builds:  # one build pass, then every run loads from the cache
        with ThreadPoolExecutor(max_workers=default_builders(usable_cpus(), ["cuda:0"])) as pool:
            stages, portable = closed_batch(cfg, jobs)
            list(pool.map(stages.build, portable))
    rows = []
    with (args.out / "scaling.jsonl").open("a") as log:
        for executor in args.executors.split(","):
            for k in counts:
                run_cfg = cfg if not args.cold_builds else cfg.model_copy(
                    update={"cache_dir": Path(tempfile.mkdtemp(prefix="kbench-scaling-"))})  # fmt: skip
                row = one_run(jobs, run_cfg, executor, k)
                rows.append(row)
                log.write(json.dumps(row) + "\n")
                log.flush()
                print(json.dumps({k2: v for k2, v in row.items() if k2 != "statuses"}), flush=True)
    (args.out / "scaling.md").write_text(report(rows, args))
    print((args.out / "scaling.md").read_text())
    common.record_markdown(args.record, "scaling", report(rows, args), artifacts=[args.out / "scaling.jsonl"])


def report(rows: list[dict[str, Any]], args: argparse.Namespace) -> str:
    env = environment()
    base = {r["executor"]: r["per_min"] for r in rows if r["gpus"] == 1}
    statuses = [r["statuses"] for r in rows]
    same = all(s == statuses[0] for s in statuses)
    lines = [
        f"# Multi-GPU scaling ({common.utc_now()})",
        "",
        f"kbench {env.get('kbench')}, torch {env.get('torch')}, {env.get('gpu_count')} x {env.get('gpu')}, "
        f"{env.get('cpu')} x {env.get('cpu_count')}",
        "",
        f"`python benchmarks/scaling.py --gpus {args.gpus} --executors {args.executors} --variants {args.variants}"
        f"{' --cold-builds' if args.cold_builds else ''}`: {rows[0]['verdicts'] if rows else 0} candidates, "
        f"builds {'in every run' if args.cold_builds else 'made once before the runs'}. Same verdict for every "
        f"candidate in every run: **{'yes' if same else 'no'}**.",
        "",
        "| executor | GPUs | verdicts | wall s | verdicts/min | efficiency | GPU busy | host CPU busy |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        eff = r["per_min"] / (r["gpus"] * base[r["executor"]]) if base.get(r["executor"]) else None
        busy = " ".join(f"{100 * b:.0f}%" if b is not None else "-" for b in r["gpu_busy"])
        lines.append(f"| {r['executor']} | {r['gpus']} | {r['verdicts']} | {r['wall_s']} | {r['per_min']} | "
                     f"{f'{100 * eff:.0f} %' if eff else '-'} | {busy} | {100 * r['cpu_busy']:.0f} % |")  # fmt: skip
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
