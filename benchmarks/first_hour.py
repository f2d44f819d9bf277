"""A new user's first hour: `make run` and `make test` on a fresh clone, timed, with what they left.

    python benchmarks/first_hour.py --repo . [--ref BRANCH] --out OUT [--note TEXT] [--record]

Clones REPO (at REF) into OUT/clone, runs `make run` and then `make test` there as the README says, and
writes OUT/first-hour.md: each command's wall time and the CPU time of its processes, its last lines (the run's verdicts, the suite's
passed/skipped counts), the size of `.venv` after each, and the load average before and after (on a
shared machine, what else ran is part of the number; `--note` says what). The logs stay in OUT. kbench's
cache folder is OUT/kbench-cache, empty at the start, as on a new machine: with the user's own
(~/.cache/kbench) an earlier `make run` on the machine left its builds and references there, and the
verdicts reused them (the 7 verdicts of `make run` took 11 s).
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from common import add_record_argument, record_markdown

# pytest's closing line: framed by "=" by default, bare under -q (as `make test` runs it)
PYTEST_LINE = re.compile(r"^(?:=+ )?(?P<summary>.*\d+ passed.*) in [\d.]+s(?: \([\d:]+\))?(?: =+)?$")
RUN_LINE = re.compile(r"^run (?P<run>\S+): (?P<new>\d+) new verdicts")


def folder_bytes(path: Path) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass  # a file gone between the listing and the stat
    return total


def pytest_summary(log: str) -> str | None:
    """pytest's closing line, e.g. `1790 passed, 37 skipped`."""
    found = [m.group("summary") for line in log.splitlines() if (m := PYTEST_LINE.match(line.strip()))]
    return found[-1] if found else None


def run_summary(log: str) -> str | None:
    """`kbench run`'s closing line: the run id and how many verdicts it stored."""
    found = [m for line in log.splitlines() if (m := RUN_LINE.match(line.strip()))]
    return f"run {found[-1].group('run')}: {found[-1].group('new')} verdicts" if found else None


def timed(command: list[str], cwd: Path, log: Path, env: dict[str, str]) -> dict[str, Any]:
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    with log.open("w") as out:
        proc = subprocess.run(command, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, env=env)
    seconds = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # CPU seconds of every process the command started and waited for: on a machine shared with other
    # work the wall time stretches, this does not; over the cores it bounds the time on an idle machine
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"rc": proc.returncode, "seconds": round(seconds, 1), "cpu_seconds": round(cpu, 1), "load_before": load,
            "load_after": os.getloadavg()[0], "venv_bytes": folder_bytes(cwd / ".venv")}  # fmt: skip


def report(steps: dict[str, dict[str, Any]], ref: str, note: str) -> str:
    lines = [
        "# The first hour: make run and make test on a fresh clone",
        "",
        f"A fresh clone of `{ref}`, each command as the README gives it, one after the other. {note}".strip(),
        "",
        "| command | wall time | CPU time (its processes) | exit | result | .venv after | load average before / after |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, s in steps.items():
        minutes = f"{s['seconds'] / 60:.1f} min ({s['seconds']:.0f} s)"
        cpu = f"{s['cpu_seconds'] / 60:.1f} min"
        load = f"{s['load_before']:.2f} / {s['load_after']:.2f}"
        size = f"{s['venv_bytes'] / 2**30:.2f} GiB"
        lines.append(f"| `{name}` | {minutes} | {cpu} | {s['rc']} | {s['result'] or '-'} | {size} | {load} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", type=Path, required=True, help="the repository to clone")
    ap.add_argument("--ref", default="", help="branch or commit to check out (default: the clone's HEAD)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--note", default="", help="what else ran on the machine meanwhile, for the record")
    add_record_argument(ap)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    clone = args.out / "clone"
    shutil.rmtree(clone, ignore_errors=True)
    subprocess.run(["git", "clone", "-q", str(args.repo.resolve()), str(clone)], check=True)
    if args.ref:
        subprocess.run(["git", "checkout", "-q", args.ref], cwd=clone, check=True)
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=clone, capture_output=True, text=True)
    cache = args.out / "kbench-cache"  # a new machine's: nothing built or run before
    shutil.rmtree(cache, ignore_errors=True)
    env = {**os.environ, "KBENCH_CACHE_DIR": str(cache.resolve())}
    steps: dict[str, dict[str, Any]] = {}
    for name, summary in (("make run", run_summary), ("make test", pytest_summary)):
        log = args.out / f"{name.replace(' ', '-')}.log"
        steps[name] = timed(name.split(), clone, log, env)
        steps[name]["result"] = summary(log.read_text(errors="replace"))
        text = report(steps, head.stdout.strip(), args.note)
        (args.out / "first-hour.md").write_text(text)  # after each command: a stopped run keeps what ran
    print(text)
    metrics = {f"{name.replace(' ', '_')}_s": s["seconds"] for name, s in steps.items()}
    metrics |= {f"{name.replace(' ', '_')}_cpu_s": s["cpu_seconds"] for name, s in steps.items()}
    metrics |= {
        f"{name.replace(' ', '_')}_venv_gib": round(s["venv_bytes"] / 2**30, 2) for name, s in steps.items()
    }
    logs = [args.out / "make-run.log", args.out / "make-test.log"]
    os.environ["BENCH_COMMIT"] = head.stdout.strip()  # the record names the clone's commit, not this tree's
    record_markdown(args.record, "first-hour", text, metrics=metrics, artifacts=logs)
    if any(s["rc"] for s in steps.values()):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
