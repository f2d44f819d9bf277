"""Tables for benchmarks/timing_fidelity.py: per-problem repeatability of the reported time (the
median, which `Verdict.speedup` divides), within-run relative standard error, trials, wall time per
timing, clock moves, profiler agreement, and the summary against the targets of the timing issue."""

from __future__ import annotations

import json
import math
import statistics
from typing import Any

# Targets: run-to-run |a-b|/min(a,b) of the reported time over problems, wall time per timing, and
# evaluator time / profiler kernel time for single-kernel candidates.
TARGETS = {"median": 0.0025, "p90": 0.005, "max": 0.01}
WALL_TARGET_S = 6.0
AGREEMENT_TOL = 0.03
ROLES = ("reference", "candidate")


def read_rows(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def p90(xs: list[float]) -> float:
    """Nearest-rank 90th percentile (an observed value; with 30 problems, the 27th smallest)."""
    s = sorted(xs)
    return s[max(0, math.ceil(0.9 * len(s)) - 1)]


def spread(xs: list[float]) -> dict[str, float | int | None]:
    if not xs:
        return {"n": 0, "median": None, "p90": None, "max": None}
    return {"n": len(xs), "median": statistics.median(xs), "p90": p90(xs), "max": max(xs)}


def rel_diff(a: float | None, b: float | None) -> float | None:
    if not a or not b:
        return None
    return abs(a - b) / min(a, b)


def _pairs(rows: list[dict[str, Any]]) -> dict[str, dict[str, dict[int, dict[str, Any]]]]:
    """problem -> role -> round -> timing row (ok rows only)."""
    out: dict[str, dict[str, dict[int, dict[str, Any]]]] = {}
    for r in rows:
        if r.get("kind") == "timing" and r.get("status") == "ok":
            out.setdefault(r["problem"], {}).setdefault(r["role"], {})[r["round"]] = r
    return out


def build_table(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    profiles = {r["problem"]: r for r in rows if r.get("kind") == "profile"}
    ncu = {r["problem"]: r for r in rows if r.get("kind") == "ncu"}
    table = []
    for problem, roles in _pairs(rows).items():
        entry: dict[str, Any] = {"problem": problem}
        for role in ROLES:
            rounds = roles.get(role, {})
            a, b = (rounds.get(k, {}).get("median_ms") for k in (1, 2))
            entry[role] = {
                "ms": [a, b],
                "rel_diff": rel_diff(a, b),
                "rse": [rounds[k]["rse"] for k in sorted(rounds)],
                "n": [rounds[k]["n"] for k in sorted(rounds)],
                "wall_s": [rounds[k]["wall_s"] for k in sorted(rounds)],
                # less the correctness outputs' forward passes and files, which every verdict needs
                # whether or not it times: what the timing itself costs, process start included
                "timing_s": [round(rounds[k]["wall_s"] - _outputs_s(rounds[k]), 3) for k in sorted(rounds)],
                "clocks_moved": any(rounds[k].get("clocks_moved") for k in rounds),
            }
        entry["agreement"] = _agreement(entry["candidate"]["ms"], profiles.get(problem), ncu.get(problem))
        table.append(entry)
    return table


def _outputs_s(row: dict[str, Any]) -> float:
    """Seconds of the job's correctness outputs: a reference row's `outputs_s`, a candidate row's
    correctness phase (a reference row from before `outputs_s` was recorded counts as all timing)."""
    return float(row.get("outputs_s") or row.get("phases", {}).get("correctness") or 0.0)


def _agreement(ms: list[float | None], prof: dict[str, Any] | None, ncu: dict[str, Any] | None) -> dict:
    evaluator = statistics.fmean([m for m in ms if m]) if any(ms) else None
    out: dict[str, Any] = {"evaluator_ms": evaluator}
    if prof is not None:
        out["kernels_per_call"] = prof.get("kernels_per_call_set")
        out["single_kernel"] = prof.get("single_kernel")
        out["profiler_ms"] = prof.get("kernel_ms_median")
        out["error"] = prof.get("error")
        if prof.get("single_kernel") and evaluator and prof.get("kernel_ms_median"):
            out["ratio"] = evaluator / prof["kernel_ms_median"]
    if ncu is not None:
        out["ncu_ms"] = ncu.get("ncu_ms_median")
        out["ncu_error"] = ncu.get("error")
        if evaluator and ncu.get("ncu_ms_median"):
            out["ncu_ratio"] = evaluator / ncu["ncu_ms_median"]
    return out


def failures(rows: list[dict[str, Any]]) -> list[str]:
    """Builds, timings and outputs that went wrong: such a problem has no (or a partial) pair."""
    out = []
    for r in rows:
        if r.get("kind") == "build" and not r.get("ok"):
            out.append(f"{r['problem']}: build failed")
        elif r.get("kind") == "timing" and (r.get("status") != "ok" or r.get("correct") is False):
            what = r.get("error") or ("wrong output" if r.get("correct") is False else r.get("status"))
            out.append(f"{r['problem']} round {r['round']} {r['role']}: {str(what)[:120]}")
    return out


def summarize(table: list[dict[str, Any]], rows: list[dict[str, Any]]) -> dict[str, Any]:
    summary: dict[str, Any] = {"problems": len(table)}
    for role in ROLES:
        diffs = [e[role]["rel_diff"] for e in table if e[role]["rel_diff"] is not None]
        walls = [w for e in table for w in e[role]["wall_s"]]
        rses = [x for e in table for x in e[role]["rse"]]
        summary[role] = {
            "rel_diff": spread(diffs),
            "meets": {k: v is not None and v <= TARGETS[k] for k, v in spread(diffs).items() if k in TARGETS},
            "rse_median": statistics.median(rses) if rses else None,
            "n_median": statistics.median([n for e in table for n in e[role]["n"]] or [0]),
            "wall_s": spread(walls),
            "timing_s": spread([t for e in table for t in e[role].get("timing_s", [])]),
            "over_max": sorted(e["problem"] for e in table if (e[role]["rel_diff"] or 0) > TARGETS["max"]),
            "over_p90": sorted(e["problem"] for e in table if (e[role]["rel_diff"] or 0) > TARGETS["p90"]),
            "slow": sorted(
                {e["problem"] for e in table if any(w > WALL_TARGET_S for w in e[role]["wall_s"])}
            ),
            "clocks_moved": sorted(e["problem"] for e in table if e[role]["clocks_moved"]),
        }
    summary["failures"] = failures(rows)
    ratios = [e["agreement"]["ratio"] for e in table if e["agreement"].get("ratio")]
    summary["agreement"] = {
        "single_kernel": len(ratios),
        "ratio": spread(ratios),
        "outside": sorted(
            e["problem"]
            for e in table
            if e["agreement"].get("ratio") and abs(e["agreement"]["ratio"] - 1) > AGREEMENT_TOL
        ),
    }
    return summary


def _f(x: Any, pct: bool = False) -> str:
    if x is None:
        return "-"
    if isinstance(x, list):
        return " / ".join(_f(v, pct) for v in x)
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, float):
        return f"{x:.3%}" if pct else f"{x:.4g}"
    return str(x)


def _repeat_table(table: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| problem | ref ms (r1 / r2) | ref diff | ref rse | ref n | ref wall s | cand ms (r1 / r2) | "
        "cand diff | cand rse | cand n | cand wall s | clocks moved |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for e in table:
        cells = [e["problem"]]
        for role in ROLES:
            r = e[role]
            cells += [_f(r["ms"]), _f(r["rel_diff"], True), _f(r["rse"], True), _f(r["n"]), _f(r["wall_s"])]
        cells.append(_f(e["reference"]["clocks_moved"] or e["candidate"]["clocks_moved"]))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _agreement_table(table: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| problem | kernels per call | evaluator ms | profiler ms | ratio | ncu ms | ncu ratio |",
        "|---|---|---|---|---|---|---|",
    ]
    for e in table:
        a = e["agreement"]
        if "kernels_per_call" not in a and "ncu_ms" not in a:
            continue
        cells = [a.get("kernels_per_call"), a["evaluator_ms"], a.get("profiler_ms"), a.get("ratio")]
        cells += [a.get("ncu_ms"), a.get("ncu_ratio")]
        lines.append("| " + " | ".join([e["problem"], *(_f(c) for c in cells)]) + " |")
    if len(lines) == 2:
        lines.append("| (no profiler rows: see the notes) | | | | | | |")
    return lines


def _summary_lines(summary: dict[str, Any]) -> list[str]:
    lines = [
        "| timing | problems | diff median | diff p90 | diff max | meets median/p90/max | median rse | "
        "median n | wall s median / max | less outputs s median / max |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for role in ROLES:
        s = summary[role]
        d, m = s["rel_diff"], s["meets"]
        meets = "/".join(_f(m.get(k)) for k in ("median", "p90", "max"))
        lines.append(
            f"| {role} | {d['n']} | {_f(d['median'], True)} | {_f(d['p90'], True)} | {_f(d['max'], True)} | "
            f"{meets} | {_f(s['rse_median'], True)} | {_f(s['n_median'])} | "
            f"{_f(s['wall_s']['median'])} / {_f(s['wall_s']['max'])} | "
            f"{_f(s['timing_s']['median'])} / {_f(s['timing_s']['max'])} |"
        )
    lines.append("")
    for role in ROLES:
        s = summary[role]
        lines.append(
            f"- {role}: over 1 % (max target): {', '.join(s['over_max']) or 'none'}; over 0.5 %: "
            f"{', '.join(s['over_p90']) or 'none'}; timings over {WALL_TARGET_S:g} s: "
            f"{', '.join(s['slow']) or 'none'}; clocks moved: {', '.join(s['clocks_moved']) or 'none'}"
        )
    for f in summary["failures"]:
        lines.append(f"- failure: {f}")
    a = summary["agreement"]
    lines.append(
        f"- agreement (single-kernel candidates: {a['single_kernel']}): ratio median {_f(a['ratio']['median'])}, "
        f"max {_f(a['ratio']['max'])}; outside ±{AGREEMENT_TOL:.0%}: {', '.join(a['outside']) or 'none'}"
    )
    return lines


def markdown(table: list[dict[str, Any]], summary: dict[str, Any], meta: dict[str, Any]) -> str:
    machine = meta["machine"]
    lines = [
        f"# Timing fidelity on {machine.get('gpu') or machine.get('cpu')} ({meta['date']})",
        "",
        f"kbench {machine.get('kbench')}, torch {machine.get('torch')}, CUDA {machine.get('cuda')}, "
        f"driver {machine.get('driver')}, triton {machine.get('triton')}; device {meta['device']}, "
        f"backend {meta['backend']}, preset {meta['preset']}, timing budget {meta['budget_s']} s.",
        "",
        "Each problem: two rounds, each a fresh reference worker (eager only, reference cache cleared) and a "
        "fresh candidate worker (the shipped solution), through kbench.evaluate's run_reference/run_candidate. "
        "diff = |r1 - r2| / min(r1, r2) of the median (the reported time); rse = within-run relative standard "
        "error of the mean; wall s = the worker's wall time seen by the host, process start included; less "
        "outputs = wall s less the correctness outputs (forward passes on the correctness seeds, files "
        "written), which every verdict needs whether or not it times.",
        f"Targets: diff median <= {TARGETS['median']:.2%}, p90 <= {TARGETS['p90']:.1%}, "
        f"max <= {TARGETS['max']:.0%}; <= {WALL_TARGET_S:g} s per timing; "
        f"evaluator / profiler within ±{AGREEMENT_TOL:.0%} for single-kernel candidates.",
        "",
        "## Summary",
        "",
        *_summary_lines(summary),
        "",
        *(f"- note: {n}" for n in meta.get("notes", [])),
        "",
        "## Repeatability per problem",
        "",
        *_repeat_table(table),
        "",
        "## Agreement with the profiler",
        "",
        "profiler ms: median over calls of the summed device-kernel durations of one forward (torch.profiler, "
        "L2 flushed before each call); ratio = evaluator ms (mean of the two rounds) / profiler ms, for "
        "candidates that launch exactly one kernel per call.",
        "",
        *_agreement_table(table),
        "",
        "```json",
        json.dumps(meta, indent=1, default=str),
        "```",
    ]
    return "\n".join(lines) + "\n"
