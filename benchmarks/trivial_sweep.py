"""The trivial-answers sweep (kbench.problems.trivial) over the suite, written as a Markdown table.

    python benchmarks/trivial_sweep.py --preset full --device cuda              # the GPU run, every problem
    python benchmarks/trivial_sweep.py --preset small --device cpu --level 1    # a CPU check

Per problem: its fp32 tolerance, the reference's own distance from a float64 computation (the honest
rounding a tolerance must leave room for), and for each trivial answer the tolerance it would need to pass,
with PASS where the problem's tolerance would let it through. Rows are written as they come (a run cut by
a time limit keeps them; `--skip N` resumes after the first N problems), with a JSON line per problem
beside the table. Exit 1 when any answer passes or a reference fails to run.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import common

from kbench.hardware import device_name
from kbench.problems import get_problem, select
from kbench.problems.trivial import ANSWERS, SweepSettings, TrivialResult, sweep
from kbench.verify import checked_device as resolve_device


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.2g}"


def row(r: TrivialResult) -> str:
    needed = {a.name: _cell(a.needed_tol) + (" **PASS**" if a.passed else "") for a in r.answers}
    verdict = f"error: {r.error}" if r.error else (", ".join(r.passing) or "none")
    cells = [r.problem_key, r.name, f"{r.tol:g}", _cell(r.reference_error)]
    cells += [needed.get(n, "n/a") for n in ANSWERS] + [verdict.replace("|", "/"), f"{r.seconds:.1f}"]
    return "| " + " | ".join(cells) + " |"


def header(title: str) -> list[str]:
    cols = ["key", "name", "tol", "ref vs fp64", *ANSWERS, "passing", "s"]
    return [title, "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="full")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dtype", default="fp32")
    ap.add_argument("--level", type=int)
    ap.add_argument("--skip", type=int, default=0, help="resume: leave out the first N selected problems")
    ap.add_argument("--no-fp64", action="store_true", help="skip the float64 yardstick column")
    ap.add_argument(
        "--out", type=Path, help="Markdown file (default: benchmark-out/trivial-sweep-<preset>.md)"
    )
    common.add_record_argument(ap)
    ap.add_argument("problems", nargs="*", help="addresses (default: the whole suite or --level)")
    args = ap.parse_args()
    device = resolve_device(args.device)
    out = args.out or Path("benchmark-out") / f"trivial-sweep-{args.preset}.md"
    chosen = [get_problem(p) for p in args.problems] if args.problems else select("kbench", level=args.level)
    chosen = chosen[args.skip :]
    settings = SweepSettings(preset=args.preset, dtype=args.dtype, device=device, fp64=not args.no_fp64)
    out.parent.mkdir(parents=True, exist_ok=True)
    title = f"Trivial answers, preset {args.preset}, {args.dtype}, on {device_name(device)}: the tolerance each needs"
    t0 = time.perf_counter()
    with (
        out.open("a" if args.skip else "w") as md,
        out.with_suffix(".jsonl").open("a" if args.skip else "w") as js,
    ):
        if not args.skip:
            md.write("\n".join(header(title)) + "\n")

        def write(r: TrivialResult) -> None:
            print(row(r), flush=True)
            md.write(row(r) + "\n")
            md.flush()
            js.write(json.dumps(r.to_dict(), default=str) + "\n")
            js.flush()

        results = sweep(chosen, settings, on_result=write)
        bad = [r for r in results if r.failed]
        summary = (
            f"\n{len(results)} problems in {time.perf_counter() - t0:.0f} s; "
            f"{sum(bool(r.passing) for r in results)} where a trivial answer passes, "
            f"{sum(bool(r.error) for r in results)} whose reference failed\n"
        )
        md.write(summary)
    print(summary.strip(), f"table: {out}", sep="\n")
    if not args.skip:  # a resumed sweep is filed once, by the call that finishes it without --skip
        common.record_markdown(
            args.record, "trivial-sweep", out.read_text(), artifacts=[out.with_suffix(".jsonl")]
        )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
