"""Tables for benchmarks/solutions.py: per-problem rows from the batch JSONL files (each backend, the best
solution per problem, errors against fp64, a note where the best does not beat torch.compile), the summary
(geomean speedups of each backend, of the best and of torch.compile over eager on the same problems, median
fraction of speed-of-light on memory-bound problems) and the markdown page."""

from __future__ import annotations

import math
import os
import sys
from typing import Any

from common import utc_now


def _geomean(xs: list[float]) -> float | None:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def _ms(row: dict[str, Any] | None, key: str) -> float | None:
    value = (row or {}).get(key)
    return value["median_ms"] if isinstance(value, dict) else None


NOISE = 0.01  # speedups within 1 % of 1.0 are ties (kbench's documented between-process noise floor)
HEADROOM = 0.8  # torch.compile at >= 80 % of speed-of-light leaves a solution little to win


def build_table(ids: list[int], rows: dict[str, dict[int, dict[str, Any]]]) -> list[dict[str, Any]]:
    table = []
    for pid in ids:
        base = rows["baseline"].get(pid, {})
        eager, comp, sol = _ms(base, "eager"), _ms(base, "compile"), base.get("sol_ms")
        entry: dict[str, Any] = {"problem": pid, "name": base.get("name", ""), "tags": base.get("tags", [])}
        entry.update({"eager_ms": eager, "compile_ms": comp, "sol_ms": sol, "bound": base.get("bound")})
        entry["baseline_error"] = base.get("error")
        entry["eager_err64"] = base.get("eager_err64")
        for b in rows:
            if b == "baseline":
                continue
            r = rows[b].get(pid, {"status": "not run"})
            entry[b] = _timed(r.get("status", "ok"), _ms(r, "time"), eager, comp, sol)
            entry[b].update({"err": r.get("max_abs_err"), "err64": r.get("err64"), "error": r.get("error")})
        timed = [(entry[b]["ms"], b) for b in rows if b != "baseline" and entry[b]["ms"]]
        if timed:
            ms, b = min(timed)
            entry["best"] = {**entry[b], "backend": b}
        else:
            cut = any(entry[b]["status"] == "not run" for b in rows if b != "baseline")
            entry["best"] = {**_timed("not run" if cut else "none", None, eager, comp, sol), "backend": None}
        entry["note"] = why_not_faster(entry)
        table.append(entry)
    return table


def _timed(
    status: str, ms: float | None, eager: float | None, comp: float | None, sol: float | None
) -> dict[str, Any]:
    return {
        "status": status,
        "ms": ms,
        "vs_eager": eager / ms if ms and eager else None,
        "vs_compile": comp / ms if ms and comp else None,
        "sol_fraction": sol / ms if ms and sol else None,
    }


def why_not_faster(e: dict[str, Any]) -> str:
    """Where the best solution does not beat torch.compile (within the noise floor), why, in the
    speed-of-light terms `kbench inspect` reports; empty where it does."""
    best, comp, sol = e["best"], e["compile_ms"], e["sol_ms"]
    if best["ms"] is None:
        return "not timed in this run" if best["status"] == "not run" else "no correct solution"
    if comp is None or best["vs_compile"] is None or best["vs_compile"] > 1 + NOISE:
        return ""
    if not sol:
        return "no speed-of-light bound for this problem"
    at = f"{e['bound']}-bound; torch.compile at {sol / comp:.0%} of SOL, best solution at {sol / best['ms']:.0%}"
    if sol / comp >= HEADROOM:
        why = f"{at}: compile is already near the floor"
    elif e["bound"] == "compute" and {"gemm-epilogue", "conv-epilogue", "mlp"} & set(e["tags"]):
        why = f"{at}: the GEMM/convolution dominates the time"
    else:
        why = f"{at}: headroom left that neither reaches"
    untimed = [b for b, r in e.items() if isinstance(r, dict) and r.get("status") == "not run"]
    return why + (f" ({', '.join(untimed)} not timed in this run)" if untimed else "")


def summarize(table: list[dict[str, Any]], backends: list[str]) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for b in [*backends, "best"]:
        ok = [e for e in table if e[b]["vs_eager"]]
        paired = [e for e in ok if e["compile_ms"]]
        mem = sorted(e[b]["sol_fraction"] for e in ok if e["bound"] == "memory" and e[b]["sol_fraction"])
        summary[b] = {
            "correct": len([e for e in table if e[b]["ms"]]),
            "of": len(table),
            "geomean_vs_eager": _geomean([e[b]["vs_eager"] for e in ok]),
            "paired_with_compile": len(paired),
            "paired_geomean_vs_eager": _geomean([e[b]["vs_eager"] for e in paired]),
            "compile_geomean_vs_eager": _geomean([e["eager_ms"] / e["compile_ms"] for e in paired]),
            "geomean_vs_compile": _geomean([e[b]["vs_compile"] for e in paired]),
            "faster_than_compile": len([e for e in paired if e[b]["vs_compile"] > 1 + NOISE]),
            "median_sol_fraction_memory_bound": mem[len(mem) // 2] if mem else None,
            "not_ok": _by_status([(e["problem"], e[b]["status"]) for e in table if not e[b]["ms"]]),
        }
    return summary


def _summary_line(b: str, s: dict[str, Any]) -> str:
    sol = s["median_sol_fraction_memory_bound"]
    name = "best solution per problem" if b == "best" else b
    return (
        f"- {name}: {s['correct']} of {s['of']} correct; geomean speedup vs eager "
        f"{_f(s['geomean_vs_eager'], '{:.2f}x')}; on the {s['paired_with_compile']} problems with a "
        f"torch.compile time: {_f(s['paired_geomean_vs_eager'], '{:.2f}x')} vs torch.compile's "
        f"{_f(s['compile_geomean_vs_eager'], '{:.2f}x')} (geomean over eager), "
        f"{_f(s['geomean_vs_compile'], '{:.2f}x')} over torch.compile, faster than it (by more than "
        f"{NOISE:.0%}) on {s['faster_than_compile']}; median fraction of SOL on memory-bound problems "
        f"{_f(sol and 100 * sol, '{:.0f}%')}; not timed: "
        + ("; ".join(f"{status} {_ranges(ids)}" for status, ids in s["not_ok"].items()) or "none")
    )


def _by_status(pairs: list[tuple[int, str]]) -> dict[str, list[int]]:
    """Problem ids grouped by status ("missing": no solution file, "not run": the run ended first, ...)."""
    grouped: dict[str, list[int]] = {}
    for pid, status in pairs:
        grouped.setdefault(status, []).append(pid)
    return grouped


def _ranges(ids: list[int]) -> str:
    """[1, 2, 3, 7] -> "1-3, 7"."""
    spans: list[list[int]] = []
    for i in sorted(ids):
        if spans and i == spans[-1][1] + 1:
            spans[-1][1] = i
        else:
            spans.append([i, i])
    return ", ".join(f"{a}-{b}" if b > a else str(a) for a, b in spans)


def _f(x: float | None, fmt: str = "{:.3f}") -> str:
    return "-" if x is None else fmt.format(x)


def markdown(
    table: list[dict[str, Any]], summary: dict[str, Any], backends: list[str], meta: dict[str, Any]
) -> str:
    lines = [
        f"# Level-2 solutions on {meta.get('gpu') or 'CPU'}, preset {meta.get('preset')}",
        "",
        f"{meta['date']}; torch {meta['torch']}, triton {meta['triton']}, CUDA {meta['cuda']}. Times are "
        "medians in ms (kbench.timing: CUDA events behind a launch spin, L2 flushed, >= 50 calls; IEEE fp32, "
        "TF32 off); speedups are eager/solution and compile/solution; SOL is kbench.analysis.roofline's "
        "speed-of-light time (the fp32 floor: a 3xTF32 tensor-core GEMM can pass it). Errors are max abs "
        "differences from an fp64 run of the reference: fp32 eager's own, then each solution's. The note says "
        f"why, where the best solution is not faster than torch.compile by more than {NOISE:.0%}.",
        "",
    ]
    head = "| problem | bound | eager | compile | SOL |"
    for b in backends:
        head += f" {b} | {b} vs eager |"
    head += " best vs eager | best vs compile | best % SOL | eager err | " + " | ".join(
        f"{b} err" for b in backends
    )
    head += " | note |"
    lines += [head, "|" + "---|" * (head.count("|") - 1)]
    for e in table:
        cells = [
            f"{e['problem']}_{e['name']}",
            e["bound"] or "-",
            _f(e["eager_ms"]),
            _f(e["compile_ms"]),
            _f(e["sol_ms"], "{:.4f}"),
        ]
        for b in backends:
            r = e[b]
            cells += [_f(r["ms"]) if r["status"] == "ok" else r["status"], _f(r["vs_eager"], "{:.2f}x")]
        best = e["best"]
        cells += [
            _f(best["vs_eager"], "{:.2f}x"),
            _f(best["vs_compile"], "{:.2f}x"),
            _f(best["sol_fraction"] and 100 * best["sol_fraction"], "{:.0f}%"),
            _f(e["eager_err64"], "{:.1e}"),
            *(_f(e[b]["err64"], "{:.1e}") for b in backends),
            e["note"],
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "## Summary", "", *[_summary_line(b, s) for b, s in summary.items()]]
    return "\n".join(lines) + "\n"


def machine() -> dict[str, Any]:
    import torch

    meta: dict[str, Any] = {"date": utc_now()}
    meta["torch"], meta["cuda"] = torch.__version__, torch.version.cuda
    meta["gpu"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    try:
        import triton

        meta["triton"] = triton.__version__
    except ImportError:
        meta["triton"] = None
    meta["python"], meta["cpus"] = sys.version.split()[0], os.cpu_count()
    return meta
