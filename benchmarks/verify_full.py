"""Run `verify --preset full --device cuda` on the whole embedded suite and write the table of eager time and
peak memory per problem to benchmark-out/verify_full.md, or the path given (run on the GPU machine)."""

from __future__ import annotations

import sys
from pathlib import Path

from kbench.hardware import environment
from kbench.problems import select
from kbench.verify import VerifyResult, verify_problems

# argv: [OUT.md [SKIP | PROBLEM...]]: SKIP resumes a run cut by a time limit; PROBLEMs re-check a few
OUT = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("benchmark-out/verify_full.md")
PICK = sys.argv[2:]


def _row(r: VerifyResult) -> str:
    eager = "-" if r.eager_ms is None else f"{r.eager_ms:.3f}"
    peak = "-" if r.peak_bytes is None else f"{r.peak_bytes / 2**20:.0f}"
    notes = "; ".join(f"{f.rule}: {f.message}" for f in r.findings).replace("|", "/")
    return f"| {r.problem_key} | {r.name} | {eager} | {peak} | {notes} |"


def _problems():  # type: ignore[no-untyped-def]
    from kbench.problems import get_problem

    if PICK and PICK[0].isdigit():
        return select("kbench")[int(PICK[0]) :]
    return [get_problem(p) for p in PICK] if PICK else select("kbench")


def main() -> int:
    run = verify_problems(
        _problems(), preset="full", device="cuda", on_result=lambda r: print(_row(r), flush=True)
    )
    gpu = environment().get("gpu")
    lines = [f"verify --preset full --device cuda on {gpu}", "", "| key | name | eager ms | peak MiB | findings |",
             "|---|---|---|---|---|", *map(_row, run.results)]  # fmt: skip
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("\n".join(lines) + "\n")
    failed = run.failures(strict=True)
    print(f"{len(run.results)} problems, {len(failed)} with findings; table in {OUT}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
