"""What the walls cost, and what they hold: verdict latency and throughput with and without them, and the
host's memory while a candidate floods its log.

    python benchmarks/walls.py --out OUT [--before DIR] [--verdicts 8] [--throughput 12] [--flood-gb 2]
    python benchmarks/walls.py --out OUT --device cuda [--before DIR]     # on a GPU, Triton, full preset

Every part runs in a fresh Python process of its own against one source tree (`src/` of this checkout,
and of `--before DIR`, another checkout of kbench whose `kbench.api` has `EvaluatorOptions`: e.g.
`git worktree add DIR <commit>`), problem 2/1: on the CPU the honest cpp fixture at the small preset, with
`--device cuda` the shipped Triton solution at the full preset (no flood: `--flood-gb 0` is implied).
Every verdict comes from a `kbench.api.Evaluator`:

- latency: the honest cpp fixture (tests/fixtures/eval/cpp_honest.py) judged one by one, as `kbench eval`
  judges (each verdict its own reference run, benchmarks/engine.py), build and reference caches warm (one
  verdict first), median seconds of `--verdicts` verdicts, timed (`measure`) and not;
- throughput: `--throughput` verdicts of that candidate through one Evaluator that files them in a run of
  a scratch store and shares the reference (`submit_many`, timed), verdicts per minute from the first
  submission to the last verdict;
- flood: a candidate that writes GB of text to its stderr at import, then runs honestly, judged one by
  one: the host's resident memory before and at its peak during the verdict (sampled every 10 ms from
  /proc/self/status), and the verdict. The tree without the bounded log is flooded with
  `--before-flood-gb` only (its host reads the whole log: a 2 GB flood would take the machine down).

Writes OUT/walls.md and OUT/walls.json; `--record` files the record under results/<hardware>/walls.jsonl.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from common import ROOT, add_record_argument, environment, record_markdown

FIXTURES = ROOT / "tests" / "fixtures" / "eval"
FLOOD = """
import os as _os
_chunk = (b"x" * 1023 + b"\\n") * 1024
for _ in range(int({mib})):
    _os.write(2, _chunk)
"""


DEVICE = "cpu"  # set by --device, in the parent and in every part
TRITON_SOLUTION = ROOT / "src/kbench/suite/solutions/triton/level2/1_Gemm_ReLU.py"


def _backend() -> str:
    return "cpp" if DEVICE == "cpu" else "triton"


def _honest() -> str:
    if DEVICE != "cpu":
        return TRITON_SOLUTION.read_text()
    text = (FIXTURES / "cpp_honest.py").read_text()
    first = text.splitlines()[0]
    if first.startswith("# include:"):
        text = (FIXTURES / first.split(":", 1)[1].strip()).read_text() + "\n" + text
    return text


def _flooding(gb: float) -> str:
    honest = _honest()
    head, sep, rest = honest.partition("\nclass ModelNew")
    return head + FLOOD.format(mib=gb * 1024) + sep + rest


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class PeakRss:
    """The process's resident memory, sampled on a thread while the block runs: its highest value."""

    def __enter__(self) -> PeakRss:
        self.before, self.peak, self._stop = _rss_mib(), 0.0, threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(0.01):
            self.peak = max(self.peak, _rss_mib())

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _rss_mib())


def _config(cache: Path, measure: bool) -> Any:
    from kbench.config import RunConfig

    preset = "small" if DEVICE == "cpu" else "full"
    return RunConfig(preset=preset, device=DEVICE, backend=_backend(), cache_dir=cache, static_checks=False,
                     baselines=["eager"], measure=measure, store=cache / "kbench.db")  # fmt: skip


def _judge(ev: Any, source: str) -> Any:
    from kbench.api import Submission

    return ev.submit(Submission("kbench:2/1", source, _backend())).verdict()


def part_latency(cache: Path, n: int) -> dict[str, Any]:
    from engine import one_by_one

    out: dict[str, Any] = {}
    for measure in (False, True):
        with one_by_one(_config(cache, measure)) as ev:
            first = _judge(ev, _honest())  # warms the caches of this kind of verdict, and the warm starter
            assert first.status.value == "ok", first.message + first.log_tail
            seconds, medians = [], []
            for _ in range(n):
                t0 = time.perf_counter()
                v = _judge(ev, _honest())
                seconds.append(time.perf_counter() - t0)
                assert v.status.value == "ok", v.message + v.log_tail
                if v.timing is not None:
                    medians.append(v.timing.median_ms)
        key = "timed" if measure else "untimed"
        out[key] = {"median_s": statistics.median(seconds), "min_s": min(seconds), "n": n}
        if medians:
            out[key]["kernel_median_ms"] = statistics.median(medians)
    return out


def part_throughput(cache: Path, n: int) -> dict[str, Any]:
    from engine import one_by_one

    from kbench.api import Evaluator, Submission

    cfg = _config(cache, True)
    # open while the batch runs: the last Evaluator to close stops the warm starter the batch's workers use
    with one_by_one(cfg) as warm:
        _judge(warm, _honest())
        with Evaluator(cfg, model="walls-bench") as ev:
            t0 = time.perf_counter()
            tickets = ev.submit_many([Submission("2/1", _honest(), _backend(), sample=i) for i in range(n)])
            statuses = [t.verdict().status.value for t in tickets]
            seconds = time.perf_counter() - t0
    return {"n": n, "seconds": seconds, "per_min": 60 * n / seconds, "ok": statuses.count("ok")}


def part_flood(cache: Path, gb: float) -> dict[str, Any]:
    from engine import one_by_one

    with one_by_one(_config(cache, False)) as ev:
        _judge(ev, _honest())
        with PeakRss() as rss:
            t0 = time.perf_counter()
            v = _judge(ev, _flooding(gb))
            seconds = time.perf_counter() - t0
    return {"gb": gb, "rss_before_mib": rss.before, "rss_peak_mib": rss.peak, "seconds": seconds,
            "status": v.status.value, "tail_chars": len(v.log_tail)}  # fmt: skip


def run_part(src: Path, part: str, arg: float, cache: Path) -> dict[str, Any]:
    """One part in a fresh interpreter that imports kbench from `src`."""
    others = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and Path(p) != ROOT / "src"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), *others]), "PYTHONDONTWRITEBYTECODE": "1"}
    cmd = [
        sys.executable,
        __file__,
        "--part",
        part,
        "--arg",
        str(arg),
        "--cache",
        str(cache),
        "--device",
        DEVICE,
    ]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"{part} on {src} failed:\n{done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _commit(src: Path) -> str:
    if (src / "COMMIT").is_file():  # a tree exported without its .git (`git archive`), carried elsewhere
        return (src / "COMMIT").read_text().strip()
    done = subprocess.run(
        ["git", "-C", str(src), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    return done.stdout.strip() or "?"


def report(results: dict[str, dict[str, Any]], args: argparse.Namespace) -> str:
    env = environment()
    labels = list(results)
    lines = [
        f"# The walls' cost and the host's memory under a log flood ({DEVICE})", "",
        f"{env['machine']}, torch {env['versions'].get('torch')}, python {env['versions'].get('python')}. "
        + ("Problem 2/1 (small preset), the honest cpp fixture, caches warm. " if DEVICE == "cpu" else
           "Problem 2/1 (full preset), the shipped Triton solution, caches warm. ")
        + ", ".join(f"{k}: kbench at {v['commit']}" for k, v in results.items()) + ".", "",
        "## Verdict latency and throughput", "",
        "| tree | untimed verdict s (median) | timed verdict s (median) | candidate's median ms | "
        "verdicts/min (Evaluator, timed) |",
        "|---|---|---|---|---|",
    ]  # fmt: skip
    for label in labels:
        r = results[label]
        lat, thr = r["latency"], r["throughput"]
        lines.append(
            f"| {label} | {lat['untimed']['median_s']:.2f} | {lat['timed']['median_s']:.2f} | "
            f"{lat['timed'].get('kernel_median_ms', float('nan')):.3f} | {thr['per_min']:.1f} |"
        )
    if not any(results[label]["flood"] for label in labels):
        return "\n".join([*lines, ""])
    lines += ["", "## Host memory while a candidate floods its log", "",
              "| tree | flood GB | host RSS before MiB | host RSS peak MiB | growth MiB | verdict | seconds |",
              "|---|---|---|---|---|---|---|"]  # fmt: skip
    for label in labels:
        for f in results[label]["flood"]:
            lines.append(
                f"| {label} | {f['gb']:g} | {f['rss_before_mib']:.0f} | {f['rss_peak_mib']:.0f} | "
                f"{f['rss_peak_mib'] - f['rss_before_mib']:.0f} | {f['status']} | {f['seconds']:.1f} |"
            )
    lines.append("")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path)
    ap.add_argument("--before", type=Path, help="another kbench checkout, measured first as 'before'")
    ap.add_argument("--verdicts", type=int, default=8)
    ap.add_argument("--throughput", type=int, default=12)
    ap.add_argument("--flood-gb", type=float, default=2.0)
    ap.add_argument("--before-flood-gb", type=float, default=0.12)
    ap.add_argument("--device", default="cpu", help="cpu, or cuda: Triton at the full preset, no flood")
    ap.add_argument("--part", choices=["latency", "throughput", "flood"], help=argparse.SUPPRESS)
    ap.add_argument("--arg", type=float, help=argparse.SUPPRESS)
    ap.add_argument("--cache", type=Path, help=argparse.SUPPRESS)
    add_record_argument(ap)
    args = ap.parse_args()
    global DEVICE
    DEVICE = args.device
    if DEVICE != "cpu":
        args.flood_gb = args.before_flood_gb = 0.0
    if args.part:
        fn = {"latency": part_latency, "throughput": part_throughput, "flood": part_flood}[args.part]
        arg = args.arg if args.part == "flood" else int(args.arg)
        print(json.dumps(fn(args.cache, arg)), flush=True)
        return 0
    if args.out is None:
        ap.error("--out is required")
    trees = ([("before", args.before.resolve())] if args.before else []) + [("after", ROOT)]
    results: dict[str, dict[str, Any]] = {}
    for label, tree in trees:
        src = tree / "src"
        cache = Path(tempfile.mkdtemp(prefix=f"kbench-walls-{label}-"))
        floods = [args.before_flood_gb] if label == "before" else [args.before_flood_gb, args.flood_gb]
        floods = [gb for gb in floods if gb > 0]
        results[label] = {
            "commit": _commit(tree),
            "latency": run_part(src, "latency", args.verdicts, cache),
            "throughput": run_part(src, "throughput", args.throughput, cache),
            "flood": [run_part(src, "flood", gb, cache) for gb in floods],
        }
        print(label, json.dumps(results[label]), flush=True)
    markdown = report(results, args)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "walls.md").write_text(markdown)
    (args.out / "walls.json").write_text(json.dumps(results, indent=1))
    print(markdown)
    after = results["after"]
    metrics = {
        "timed_verdict_s": round(after["latency"]["timed"]["median_s"], 3),
        "verdicts_per_min": round(after["throughput"]["per_min"], 1),
    }
    if "before" in results:
        metrics["before_timed_verdict_s"] = round(results["before"]["latency"]["timed"]["median_s"], 3)
        metrics["before_verdicts_per_min"] = round(results["before"]["throughput"]["per_min"], 1)
    if after["flood"]:
        metrics["flood_peak_growth_mib"] = round(
            max(f["rss_peak_mib"] - f["rss_before_mib"] for f in after["flood"]), 1
        )
    record_markdown(args.record, "walls", markdown, metrics=metrics, artifacts=[args.out / "walls.json"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
