"""Run named measurements in one call, each into OUT/NAME: the entry point of every benchmark.

    python benchmarks/run.py --list
    python benchmarks/run.py --out OUT NAME[=ARGS] [NAME ...]          # e.g. kill-hang speed-cold
    python benchmarks/run.py --out OUT --record NAME ...               # also file each record
    python benchmarks/run.py --out OUT --gpu 1 --cpus 16-31 timing-fidelity   # pinned to a GPU and cores

A measurement is a command line from MEASUREMENTS; `NAME=ARGS` replaces its default arguments (one string,
split like a shell; `{out}` is the measurement's folder, `{cache}` the call's shared build cache). Each runs
with its output tee'd to OUT/NAME/log.txt and its files under OUT/NAME; a failing one is reported and the
next one runs. With `--record [RESULTS]`, measurements that file records (marked `*` in --list) append
theirs to RESULTS/<hardware>/<benchmark>.jsonl (default benchmarks/results; on a remote machine give a folder
under OUT and merge it here with `python benchmarks/tables.py merge OUT/results`). Nothing here knows about
a particular machine: sizes, counts, GPUs and cores are arguments.
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from common import RESULTS, ROOT

PY = sys.executable


@dataclass(frozen=True)
class Measurement:
    argv: str  # after `python`: a script or `-m module`, with {out} and {cache}
    what: str
    records: bool = False  # takes --record RESULTS


MEASUREMENTS: dict[str, Measurement] = {
    # the machine and the test suite
    "env": Measurement("-m kbench env --format json", "the machine's fingerprint"),
    "gpu-tests": Measurement(
        "-m pytest -q -p no:cacheprovider -m gpu tests/sandbox tests/referee tests/evaluate tests/problems/test_inputs.py",
        "the GPU tests of the sandbox, timing and correctness",
    ),
    "gpu-tests-all": Measurement("-m pytest -q -p no:cacheprovider -m gpu tests", "every GPU test"),
    # the suite
    "verify-full": Measurement(
        "benchmarks/verify_full.py {out}/verify_full.md",
        "verify --preset full --strict on every problem, on a GPU",
    ),
    "trivial-sweep": Measurement(
        "benchmarks/trivial_sweep.py --preset full --device cuda --out {out}/trivial-sweep-full.md",
        "zeros, the input, fp16/bf16, stale outputs, noise, constants against every full preset",
        records=True,
    ),
    "inspect": Measurement(
        "benchmarks/inspect_gpu.py --out {out} --shards 4",
        "kbench inspect --all --level 2 --measure-ceilings: eager and compile against speed-of-light",
    ),
    # the evaluator's verdicts
    "selftest-gpu": Measurement(
        "-m kbench selftest --device cuda", "every anti-cheat fixture, the GPU ones included"
    ),
    "fixtures-controls": Measurement(
        "benchmarks/selftest_gpu.py --out {out} --solutions cuda,triton --cache-dir {cache} --slots 3",
        "the GPU fixtures, the prompt examples and every shipped solution as an honest control",
    ),
    "evaluator-gpu": Measurement(
        "benchmarks/evaluator_gpu.py --out {out}",
        "honest, crashing and repeated candidates through evaluate()",
    ),
    "solutions": Measurement(
        "benchmarks/solutions.py --out {out} --jobs 16",
        "the shipped level-2 solutions against eager and torch.compile, fraction of speed-of-light",
        records=True,
    ),
    # timing
    "prebuild": Measurement(
        "benchmarks/timing_fidelity.py --out {out} --cache-dir {cache} --build-only --problems 36",
        "build the CUDA solutions into the call's cache (for the measurements after it)",
    ),
    "timing-fidelity": Measurement(
        "benchmarks/timing_fidelity.py --out {out} --cache-dir {cache} --problems 30 "
        "--first 23,24,25,26,27,28 --ncu --max-seconds 540",
        "run-to-run repeatability and agreement with the profiler",
    ),
    # speed of the harness
    "speed-cold": Measurement(
        "benchmarks/verdict_speed.py --out {out} --cold 2/1,2/3,2/7,2/13,2/23,2/29,2/30,2/33,2/35,2/17 "
        "--big 2/25,2/36 --warm 2/1,2/23,2/25 --max-seconds 480",
        "cold and warm verdict latency against the upstream flow",
        records=True,
    ),
    "vs-upstream": Measurement(
        "benchmarks/vs_upstream.py --out {out}",
        "goals 1-3 in one call: cold and warm latency, throughput on 48 problems, against the upstream flow",
        records=True,
    ),
    "vs-upstream-108": Measurement(
        "benchmarks/vs_upstream.py --out {out} --only throughput,upstream --solutions 36 --variants 3 "
        "--limit 0 --upstream-limit 48 --throughput-seconds 480 --upstream-seconds 360 --grace 60",
        "goal 3 on the 108-candidate batch (36 problems x 3), against the upstream flow on its first 48",
        records=True,
    ),
    "throughput": Measurement(
        "benchmarks/throughput.py --out {out} --solutions 36 --variants 3 --slots 3 --max-seconds 420 "
        "--warm 24 --warm-seconds 90",
        "108 distinct CUDA candidates (36 problems x 3), cold caches: verdicts per minute",
    ),
    "upstream-flow": Measurement(
        "benchmarks/upstream_flow.py --out {out} --limit 24 --builders 16",
        "the upstream flow on the throughput batch's files (then --compare with throughput.json)",
    ),
    "scaling": Measurement(
        "benchmarks/scaling.py --out {out} --gpus 1,2,4,8",
        "local and Ray executors on 1-8 GPUs",
        records=True,
    ),
    "service-latency": Measurement(
        "benchmarks/service_latency.py --out {out} --problems 2/1,2/23 --backend triton --device cuda",
        "warm verdict latency through the library API and kbench serve, and the rate with 8 clients",
        records=True,
    ),
    "soak": Measurement(
        "benchmarks/soak.py --out {out} --minutes 10 --clients 16",
        "kbench serve under 16 clients of honest, wrong, hanging, crashing and flooding candidates (CPU, ~11 min)",
        records=True,
    ),
    "output-handling": Measurement(
        "benchmarks/output_handling.py --gib 1 --out {out}/output_handling.md",
        "the host's comparison and a GPU output's write, per GiB",
    ),
    "walls": Measurement(
        "benchmarks/walls.py --out {out}",
        "verdict latency and throughput with the walls, and the host's memory under a 2 GB log flood (CPU)",
        records=True,
    ),
    "scratch-io": Measurement(
        "benchmarks/scratch_io.py --gib 1 --files 4 --out {out}/scratch_io.md",
        "the job folder's round trip of outputs, per GiB",
    ),
    "reference-cache-policy": Measurement(
        "benchmarks/reference_cache_policy.py --out {out}/reference_cache_policy.md",
        "the reference disk cache's hits on a run's later passes over the suite, by eviction policy (CPU)",
        records=True,
    ),
    "worker-start": Measurement(
        "benchmarks/worker_start.py --out {out}/worker-start.md",
        "a worker spawned against one forked by the starter, and Evaluators reopened in one process",
        records=True,
    ),
    "starter-preloads": Measurement(
        "benchmarks/starter_preloads.py --out {out}/starter-preloads.md",
        "what a long-lived warm starter preloads and its CPU, with and without a compile baseline",
        records=True,
    ),
    "batch-together": Measurement(
        "benchmarks/batch_together.py --device cuda --repeats 2 --survey 36 --out {out}/batch_together.jsonl",
        "the batch-together attack against its honest twin, and honest solutions' call alone (GPU)",
    ),
    "batch-together-cpu": Measurement(
        "benchmarks/batch_together.py --device cpu --repeats 4 --out {out}/batch_together.jsonl",
        "the batch-together attack in C++ against its honest twin (CPU)",
    ),
    "sampling-overhead": Measurement(
        "benchmarks/sampling_overhead.py --out {out}/sampling-overhead.md",
        "the CPU referee's sampling: its cost per period, and a candidate that feels it (CPU)",
    ),
    "build-recipes": Measurement(
        "benchmarks/build_recipes.py --out {out}",
        "nvcc time of every shipped CUDA unit, light vs per-operator headers",
    ),
    "build-bindings": Measurement(
        "benchmarks/build_recipes.py --bindings --out {out}",
        "g++ time of every shipped bindings file, torch/extension.h vs the lean bindings header",
    ),
    "cpu-main-job": Measurement(
        "benchmarks/cpu_main_job.py --cache-dir {cache} --out {out}/cpu_main_job.md",
        "per-phase seconds of the CPU main job",
    ),
    "first-hour": Measurement(
        "benchmarks/first_hour.py --repo . --out {out}",
        "make run and make test on a fresh clone of this repository, timed",
        records=True,
    ),
    "llm-throughput": Measurement(
        "benchmarks/llm_throughput.py --out {out}/llm-throughput.md",
        "1,000 prompts against a local server answering 429s, killed and resumed",
    ),
    # fault containment
    "kill-hang": Measurement(
        "benchmarks/kill_hang.py --out {out}/kill-hang.md", "kill during a hang, each signal", records=True
    ),
    "chaos": Measurement(
        "benchmarks/chaos.py --cycles 20 --out {out}/chaos.md",
        "SIGKILL at random moments, resume",
        records=True,
    ),
}


def command(name: str, given: str, out: Path, cache: Path, record: Path | None) -> list[str]:
    m = MEASUREMENTS[name]
    argv = shlex.split(m.argv.format(out=out, cache=cache))
    if given:  # the script (or `-m module`) stays, its arguments are replaced
        head = argv[: 2 if argv[0] == "-m" else 1]
        args = shlex.split(given.format(out=out, cache=cache))
        if args[: len(head)] == head:  # `NAME=script.py ARGS`: the script named again, as it is anyway
            args = args[len(head) :]
        argv = head + args
    if record is not None and m.records:
        argv += ["--record", str(record)]
    return [PY, *argv]


def run_one(argv: list[str], log_path: Path, env: dict[str, str], timeout: float | None) -> int:
    """Run one measurement in its own session, its output tee'd to log_path; end the session at timeout."""
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            argv,
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        timer = threading.Timer(timeout, os.killpg, (proc.pid, signal.SIGKILL)) if timeout else None
        if timer:
            timer.start()
        assert proc.stdout is not None
        for line in proc.stdout:
            log.write(line)
            print(line, end="", flush=True)
        code = proc.wait()
        if timer:
            timer.cancel()
    return code


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line; `--record NAME` (a measurement's name where --record's folder would go) is
    read as `NAME --record`."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("benchmark-out"))
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--record", type=Path, nargs="?", const=RESULTS, default=None, metavar="RESULTS")
    ap.add_argument(
        "--cache-dir", type=Path, help="build cache shared by the measurements ({cache}; default: new)"
    )
    ap.add_argument("--gpu", help="CUDA_VISIBLE_DEVICES for every measurement of this call (e.g. 1, or 0,1)")
    ap.add_argument(
        "--cpus", help="cores for every measurement of this call, as taskset takes them (e.g. 16-31)"
    )
    ap.add_argument(
        "--timeout", type=float, help="seconds per measurement; its whole session is killed after"
    )
    ap.add_argument("names", nargs="*")
    args = ap.parse_args(argv)
    if (
        args.record is not None
        and str(args.record).partition("=")[0] in MEASUREMENTS
        and not args.record.exists()
    ):
        # `--record NAME`: argparse took the measurement's name for --record's folder
        args.names, args.record = [str(args.record), *args.names], RESULTS
    return args


def main() -> int:
    args = arguments()
    if args.list or not args.names:
        for name, m in MEASUREMENTS.items():
            print(f"{name:18} {'*' if m.records else ' '} {m.what}")
        return 0
    cache = args.cache_dir or Path(tempfile.mkdtemp(prefix="kbench-bench-cache-"))
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    if args.gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = args.gpu
    failed = []
    for item in args.names:
        name, _, given = item.partition("=")
        if name not in MEASUREMENTS:
            raise SystemExit(f"unknown measurement {name!r}; known: {', '.join(MEASUREMENTS)}")
        out = (args.out / name).resolve()
        out.mkdir(parents=True, exist_ok=True)
        argv = command(name, given, out, cache, args.record.resolve() if args.record else None)
        if args.cpus:
            argv = ["taskset", "-c", args.cpus, *argv]
        t0 = time.monotonic()
        print(f"== {name}: {' '.join(argv)}", flush=True)
        code = run_one(argv, out / "log.txt", env, args.timeout)
        print(f"== {name}: exit {code} after {time.monotonic() - t0:.0f} s", flush=True)
        if code != 0:
            failed.append(name)
    if failed:
        print(f"failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
