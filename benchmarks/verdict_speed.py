"""Verdict speed against the upstream flow: cold latency of one `kbench eval`, warm latency in one process.

    python benchmarks/verdict_speed.py --out OUT [--cold 2/1,2/3,...] [--big 2/25,2/36] [--warm 2/1,2/23]

Cold: for each problem, its shipped solution (`--backend`, Triton by default: nothing to build) is judged
in a fresh process by `kbench eval` (eager baseline only, an empty cache folder: no reference or
baseline cached) and by the upstream flow (benchmarks/upstream_flow.py's child: one fresh process that
builds Model and ModelNew, 5 correctness trials, 3 warm-up and 100 timed calls). Each candidate is
compiled once by each flow before it is timed (an untimed evaluation), so Triton's cache, upstream's
extensions folder and kbench's build cache are warm for both; kbench's reference cache is emptied.
Reported per problem: both processes' wall seconds, their ratio, kbench's verdict, its top-level phases
(phases.py) and the share of its wall time they name. `--big` takes problems with ~1 GiB outputs,
reported apart (the goal there is 1.5x upstream).

Bytecode: where torch is installed without compiled bytecode and Python may not write it (uv's default
install, PYTHONDONTWRITEBYTECODE, a read-only site-packages), every fresh process compiles torch's
modules again; kbench keeps its processes' bytecode in its cache folder then (kbench/sandbox/bytecode.py), the
upstream flow's process compiles as the machine has it. So the upstream flow is also timed with a
bytecode folder of its own (`upstream_bytecode`, warmed by its untimed run): the comparison on equal
terms. kbench's own folder is warmed by one untimed `kbench eval` before the first problem, as an
installation's first command does (later problems' warm-ups, for their builds, take `--no-timing`);
that command also stores Triton's cache key in kbench's cache folder (backends/tritonkey.py), which the
upstream flow's process works out again each time, as Triton does in any fresh process. Each cold
verdict's row also says what its timing loops did (`loops`: calls, why they stopped, warm-up, seconds),
for the candidate and each baseline.

Warm: in one process, one `kbench.api.Evaluator` that keeps each problem's reference run (as `kbench run`
or a long-lived evaluator keeps it; benchmarks/engine.py, each candidate built inside its evaluation)
judges the solution of each `--warm` problem once (cold) and then `--repeats` more times: the warm
verdicts' seconds, median and max.

Order: cold, warm, then big. With `--max-seconds`, a problem is not started once the time left would
not cover it (judged from the longest one so far); the report names what was left out, and the record
is filed with what ran.

Writes OUT/verdict_speed.json and OUT/verdict_speed.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import common
from common import BENCHMARKS

KBENCH = [sys.executable, "-m", "kbench"]
UPSTREAM = [sys.executable, str(BENCHMARKS / "upstream_flow.py"), "--child", "eval"]
TOP = ("cli", "checks", "ref", "build", "cand", "judge", "other")
# A cold verdict's path from the command's start on (phases.py): the wait for the warm starter, its own
# start and imports, the reference worker, the candidate's timing, the judge's sampled outputs and floor
PATH = ("ref:spawn", "ref:starter", "ref:starter_start", "ref:starter_torch", "ref:starter_kbench",
        "ref:worker", "cand:timing", "judge:samples", "judge:sol")  # fmt: skip


def _solution(problem: str, backend: str, folder: Path) -> Path:
    from kbench.problems import get_problem
    from kbench.solutions import shipped_candidate as reference_candidate

    cand = reference_candidate(get_problem(problem), backend)
    if cand is None:
        raise SystemExit(f"no shipped {backend} solution for {problem}")
    path = folder / f"{problem.replace('/', '_')}_{backend}.py"
    path.write_text(cand.source)
    return path


def _output_mib(problem: str, preset: str) -> float:
    from kbench.analysis.roofline import problem_flops
    from kbench.problems import get_problem

    return round(problem_flops(get_problem(problem), preset).output_bytes / 2**20, 1)


def _timed(cmd: list[str], env: dict[str, str], timeout: float = 900) -> tuple[float, str, str, int]:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    return time.perf_counter() - t0, proc.stdout, proc.stderr, proc.returncode


def bytecode_env(env: dict[str, str], folder: Path) -> dict[str, str]:
    """`env` with a bytecode folder of its own that Python reads and writes (the upstream flow on equal
    terms with kbench's, kbench/sandbox/bytecode.py)."""
    out = {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return out | {"PYTHONPYCACHEPREFIX": str(folder)}


def _upstream(problem: str, path: Path, preset: str, device: str, env: dict[str, str]) -> dict[str, Any]:
    wall, out, err, code = _timed(UPSTREAM + ["--cand", str(path), "--problem", problem, "--preset", preset,
                                              "--device", device], env)  # fmt: skip
    lines = [ln for ln in out.splitlines() if ln.startswith("{")]
    row = json.loads(lines[-1]) if code == 0 and lines else {"error": err[-400:]}
    return row | {"wall_s": round(wall, 2)}


def _kbench(
    problem: str, path: Path, args: argparse.Namespace, env: dict[str, str], no_timing: bool = False
) -> dict[str, Any]:
    """`kbench eval` in a fresh process with no reference or baseline cached (builds are kept in
    `--cache`, as upstream keeps its extensions folder); `no_timing`: correctness only (a build's warm-up)."""
    cache = args.cache
    shutil.rmtree(cache / "reference", ignore_errors=True)
    run_env = env | {"KBENCH_CACHE_DIR": str(cache), "KBENCH_BASELINES": "eager"}
    cmd = KBENCH + ["eval", "-p", problem, "-c", str(path), "--backend", args.backend, "--preset",
                    args.preset, "--format", "json"]  # fmt: skip
    wall, out, err, code = _timed(cmd + (["--no-timing"] if no_timing else []), run_env)
    if code != 0:
        return {"wall_s": round(wall, 2), "error": err[-600:]}
    verdict = json.loads(out)
    phases = {k: v for k, v in verdict["phases"]}
    top = sum(phases.get(k, 0.0) for k in TOP)
    loops = {"candidate": _loop(verdict.get("timing"))} | {
        m: _loop(s) for m, s in verdict.get("baselines") or []
    }
    return {
        "wall_s": round(wall, 2),
        "status": verdict["status"],
        "rule": verdict["rule"],
        "verdict_s": verdict["seconds"],
        "speedup_eager": (verdict.get("speedup") or {}).get("eager"),
        "phases": phases,
        # the process's wall time its named phases cover (the interpreter's exit is the rest)
        "accounted": round((top - phases.get("other", 0.0)) / wall, 3) if wall else None,
        "loops": {k: v for k, v in loops.items() if v},
    }


def _loop(stats: dict[str, Any] | None) -> dict[str, Any]:
    """What a timing loop did (referee/timing.py): its calls, why it stopped, its warm-up and wall seconds."""
    if not stats:
        return {}
    loop = stats.get("loop") or {}
    warmup = [loop.get("warmup_s"), loop.get("warmup_calls"), loop.get("warmup_end")] if loop else None
    return {"n": stats.get("n"), "median_ms": stats.get("median_ms"), "stop": loop.get("stop"),
            "warmup": warmup, "wall_s": loop.get("wall_s")}  # fmt: skip


class Clock:
    """The call's time limit: whether another item fits, judged from the longest one so far."""

    def __init__(self, limit_s: float | None) -> None:
        self.t0, self.limit_s, self.longest = time.monotonic(), limit_s, 0.0
        self.left_out: list[str] = []

    def fits(self, what: str) -> bool:
        if self.limit_s is None or time.monotonic() - self.t0 + self.longest <= self.limit_s:
            return True
        self.left_out.append(what)
        return False

    def done(self, started: float) -> None:
        self.longest = max(self.longest, time.monotonic() - started)


def cold(
    problems: list[str],
    args: argparse.Namespace,
    folder: Path,
    env: dict[str, str],
    clock: Clock,
    part: str = "cold",
) -> list[dict[str, Any]]:
    """Each problem's cold verdict against the upstream flow's; `part` names the list in what is left out."""
    rows: list[dict[str, Any]] = []
    for problem in problems:
        if not clock.fits(f"{part} {problem}"):
            continue
        started = time.monotonic()
        path = _solution(problem, args.backend, folder)
        compiled = bytecode_env(env, args.cache / "upstream-pycache")
        _upstream(problem, path, args.preset, args.device, compiled)  # its kernels and bytecode: untimed
        if args.backend != "triton" or not rows:  # kbench's builds (and bytecode) as warm as upstream's
            # the first a whole verdict (its timing and floor imports too), later ones only their builds
            _kbench(problem, path, args, env, no_timing=bool(rows))
        k = _kbench(problem, path, args, env)
        u = _upstream(problem, path, args.preset, args.device, env)
        ub = _upstream(problem, path, args.preset, args.device, compiled)
        row = {"problem": problem, "output_mib": _output_mib(problem, args.preset), "kbench": k, "upstream": u,
               "upstream_bytecode": ub,
               "ratio": round(k["wall_s"] / u["wall_s"], 2) if u.get("wall_s") else None,
               "ratio_bytecode": round(k["wall_s"] / ub["wall_s"], 2) if ub.get("wall_s") else None}  # fmt: skip
        rows.append(row)
        print(json.dumps(row), flush=True)
        clock.done(started)
    return rows


def warm(problems: list[str], args: argparse.Namespace, folder: Path, clock: Clock) -> list[dict[str, Any]]:
    from engine import shared

    from kbench.api import Submission
    from kbench.config import resolve
    from kbench.problems import get_problem

    rows = []
    with tempfile.TemporaryDirectory(prefix="kbench-warm-") as cache:
        cfg = resolve(flags={"backend": args.backend, "preset": args.preset, "baselines": ["eager"],
                             "cache_dir": Path(cache), "device": args.device})  # fmt: skip
        with shared(cfg, build_ahead=False) as ev:
            for problem in problems:
                if not clock.fits(f"warm {problem}"):
                    continue
                started = time.monotonic()
                prob, source = get_problem(problem), _solution(problem, args.backend, folder).read_text()
                seconds, statuses, phases = [], [], []
                for _ in range(args.repeats + 1):
                    v = ev.submit(Submission(prob, source, args.backend)).verdict()
                    seconds.append(v.seconds)
                    statuses.append(v.status.value)
                    phases.append(dict(v.phases))
                row = {"problem": problem, "output_mib": _output_mib(problem, args.preset),
                       "cold_s": seconds[0], "warm_s": seconds[1:], "statuses": statuses,
                       "warm_phases": phases[-1]}  # fmt: skip
                rows.append(row)
                print(json.dumps(row), flush=True)
                clock.done(started)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--cold", default="")
    ap.add_argument("--big", default="")
    ap.add_argument("--warm", default="")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--backend", default="triton")
    ap.add_argument("--preset", default="full")
    ap.add_argument("--device", default="cuda")
    ap.add_argument(
        "--cache", type=Path, default=None, help="kbench's cache (default: a fresh folder, removed)"
    )
    ap.add_argument("--max-seconds", type=float, help="start no problem the time left would not cover")
    common.add_record_argument(ap)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    fresh = args.cache is None
    args.cache = args.cache or Path(tempfile.mkdtemp(prefix="kbench-speed-cache-"))
    try:
        run(args)
    finally:
        # its references at full size (GBs for the 1 GiB problems): a later run would find the disk full
        if fresh:
            shutil.rmtree(args.cache, ignore_errors=True)


FOLDERS = ("out", "cache", "record")  # the arguments that name this machine's folders


def command_args(given: dict[str, str]) -> str:
    """The measurement's arguments as a command line takes them (`max_seconds` -> `--max-seconds`)."""
    return " ".join(
        f"--{k.replace('_', '-')} {v}" for k, v in given.items() if k not in FOLDERS and v and v != "None"
    )


def run(args: argparse.Namespace) -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    # where it wrote, cached and filed are this machine's folders, not part of the measurement
    result: dict[str, Any] = {"args": {k: str(v) for k, v in vars(args).items() if k not in FOLDERS}}
    from kbench.hardware import environment

    result["env"] = environment()
    clock = Clock(args.max_seconds)
    with tempfile.TemporaryDirectory(prefix="kbench-speed-") as tmp:
        folder = Path(tmp)
        if args.cold:
            result["cold"] = cold(args.cold.split(","), args, folder, env, clock)
            _write(args.out, result)
        if args.warm:
            result["warm"] = warm(args.warm.split(","), args, folder, clock)
            _write(args.out, result)
        if args.big:
            result["big"] = cold(args.big.split(","), args, folder, env, clock, part="big")
    result["left_out"] = clock.left_out
    _write(args.out, result)
    common.record_markdown(
        args.record, "verdict-speed", report(result), artifacts=[args.out / "verdict_speed.json"]
    )


def _write(out: Path, result: dict[str, Any]) -> None:
    (out / "verdict_speed.json").write_text(json.dumps(result, indent=1))
    (out / "verdict_speed.md").write_text(report(result))


def report(result: dict[str, Any]) -> str:
    env = result["env"]
    lines = [f"# Verdict speed against the upstream flow ({common.utc_now()})",
             "", f"kbench {env.get('kbench')}, torch {env.get('torch')}, triton {env.get('triton')}, python "
             f"{env.get('python')}, {env.get('cpu')} x {env.get('cpu_count')}, gpu {env.get('gpu')}, driver "
             f"{env.get('driver')}", "", f"`python benchmarks/verdict_speed.py {command_args(result['args'])}`", ""]  # fmt: skip
    for name in ("cold", "big"):
        rows = result.get(name)
        if not rows:
            continue
        ratios = [r["ratio"] for r in rows if r.get("ratio")]
        even = [r["ratio_bytecode"] for r in rows if r.get("ratio_bytecode")]
        lines += [f"## {'Cold latency' if name == 'cold' else 'Cold latency, large outputs'}", "",
                  f"Median kbench / upstream wall: **{statistics.median(ratios):.2f}** over {len(ratios)} problems"
                  + (f"; against the upstream flow with a bytecode folder too (`+pyc`): **{statistics.median(even):.2f}**." if even else ".")
                  if ratios else "",
                  "", "| problem | out MiB | upstream s | upstream+pyc s | kbench s | ratio | ratio +pyc | verdict | accounted | " + " | ".join(TOP) + " |",
                  "|---|---|---|---|---|---|---|---|---|" + "---|" * len(TOP)]  # fmt: skip
        for r in rows:
            k, u, ub = r["kbench"], r["upstream"], r.get("upstream_bytecode") or {}
            ph = k.get("phases", {})
            status = k.get("status", "error") + (f" [{k['rule']}]" if k.get("rule") else "")
            acc = f"{100 * k['accounted']:.0f} %" if k.get("accounted") else "-"
            lines.append(f"| {r['problem']} | {r['output_mib']} | {u.get('wall_s')} | {ub.get('wall_s', '-')} | {k.get('wall_s')} "
                         f"| {r.get('ratio')} | {r.get('ratio_bytecode', '-')} "
                         f"| {status} | {acc} | " + " | ".join(f"{ph.get(t, 0.0):.2f}" for t in TOP) + " |")  # fmt: skip
        lines += ["", "Along the path (s; `-`: not recorded):", "", "| problem | " + " | ".join(PATH) + " |",
                  "|---|" + "---|" * len(PATH)]  # fmt: skip
        for r in rows:
            ph = r["kbench"].get("phases", {})
            cells = (f"{ph[t]:.2f}" if t in ph else "-" for t in PATH)
            lines.append(f"| {r['problem']} | " + " | ".join(cells) + " |")
        lines.append("")
    if result.get("left_out"):
        lines += [f"Not run (the call's time limit): {', '.join(result['left_out'])}.", ""]
    if result.get("warm"):
        warm_all = [s for r in result["warm"] for s in r["warm_s"]]
        lines += ["## Warm latency (one process, the reference kept)", "",
                  f"Warm verdicts: median **{statistics.median(warm_all):.2f} s**, max {max(warm_all):.2f} s.", "",
                  "| problem | out MiB | cold s | warm s | statuses |", "|---|---|---|---|---|"]  # fmt: skip
        for r in result["warm"]:
            lines.append(f"| {r['problem']} | {r['output_mib']} | {r['cold_s']:.2f} | "
                         f"{', '.join(f'{s:.2f}' for s in r['warm_s'])} | {', '.join(r['statuses'])} |")  # fmt: skip
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
