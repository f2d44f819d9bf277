"""Run named measurements in one call, each into OUT/NAME (for a GPU machine lent by the call).

    python benchmarks/run.py --out OUT NAME[=ARGS] [NAME ...]      # e.g. kill-hang speed-cold
    python benchmarks/run.py --list

A measurement is a command line from MEASUREMENTS; `NAME=ARGS` replaces its default arguments (one string,
split like a shell). Each runs with its output tee'd to OUT/NAME/log.txt, its files under OUT/NAME; a
failing one is reported and the next one runs. Nothing here knows about a particular machine: sizes and
counts are the measurement's arguments.
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PY = sys.executable

# name -> (argv with {out} for the measurement's folder, what it measures)
MEASUREMENTS: dict[str, tuple[str, str]] = {
    "env": ("-m kbench env --format json", "the machine's fingerprint"),
    "gpu-tests": (
        "-m pytest -q -p no:cacheprovider -m gpu tests/sandbox tests/test_timing.py tests/test_correctness.py",
        "the GPU tests of the sandbox, timing and correctness",
    ),
    "gpu-tests-all": ("-m pytest -q -p no:cacheprovider -m gpu tests", "every GPU test"),
    "selftest-gpu": ("-m kbench selftest --device cuda", "every anti-cheat fixture, the GPU ones included"),
    "kill-hang": ("benchmarks/kill_hang.py --out {out}/kill-hang.md", "kill during a hang, each signal"),
    "speed-cold": (
        "benchmarks/verdict_speed.py --out {out} --cold 2/1,2/3,2/7,2/13,2/23,2/29,2/30,2/33,2/35,2/17 "
        "--big 2/25,2/36 --warm 2/1,2/23,2/25",
        "cold and warm verdict latency against the upstream flow",
    ),
    "chaos": ("benchmarks/chaos.py --cycles 20 --out {out}/chaos.md", "SIGKILL at random moments, resume"),
    "scaling": ("benchmarks/scaling.py --out {out} --gpus 1,2,4,8", "local and Ray executors on 1-8 GPUs"),
    "trivial-sweep": (
        "benchmarks/trivial_sweep.py --preset full --device cuda --out {out}/trivial-sweep-full.md",
        "zeros, the input, fp16/bf16, stale outputs, noise, constants against every full preset",
    ),
    "service-latency": (
        "benchmarks/service_latency.py --out {out} --problems 2/1,2/23 --backend triton --device cuda",
        "warm verdict latency through the library API and kbench serve, and the rate with 8 clients",
    ),
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("benchmark-out"))
    ap.add_argument("--list", action="store_true")
    ap.add_argument("names", nargs="*")
    args = ap.parse_args()
    if args.list or not args.names:
        for name, (_, what) in MEASUREMENTS.items():
            print(f"{name:16} {what}")
        return 0
    failed = []
    for item in args.names:
        name, _, given = item.partition("=")
        if name not in MEASUREMENTS:
            raise SystemExit(f"unknown measurement {name!r}; known: {', '.join(MEASUREMENTS)}")
        out = args.out / name
        out.mkdir(parents=True, exist_ok=True)
        default = MEASUREMENTS[name][0]
        argv = shlex.split(default.format(out=out))
        if given:  # the script (or `-m module`) stays, its arguments are replaced
            argv = argv[: 2 if argv[0] == "-m" else 1] + shlex.split(given.format(out=out))
        t0 = time.monotonic()
        print(f"== {name}: {' '.join(argv)}", flush=True)
        with (out / "log.txt").open("w") as log:
            proc = subprocess.Popen([PY, *argv], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            assert proc.stdout is not None
            for line in proc.stdout:
                log.write(line)
                print(line, end="", flush=True)
        code = proc.wait()
        print(f"== {name}: exit {code} after {time.monotonic() - t0:.0f} s", flush=True)
        if code != 0:
            failed.append(name)
    if failed:
        print(f"failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
