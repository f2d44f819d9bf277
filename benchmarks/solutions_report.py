"""Tables for benchmarks/solutions.py: per-problem rows from the batch JSONL files, the summary (geomean
speedups of each backend and of torch.compile over eager on the same problems, median fraction of
speed-of-light on memory-bound problems) and the markdown page."""

from __future__ import annotations

import datetime as dt
import math
import os
import sys
from typing import Any


def _geomean(xs: list[float]) -> float | None:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def _ms(row: dict[str, Any] | None, key: str) -> float | None:
    value = (row or {}).get(key)
    return value["median_ms"] if isinstance(value, dict) else None


def build_table(ids: list[int], rows: dict[str, dict[int, dict[str, Any]]]) -> list[dict[str, Any]]:
    table = []
    for pid in ids:
        base = rows["baseline"].get(pid, {})
        eager, comp, sol = _ms(base, "eager"), _ms(base, "compile"), base.get("sol_ms")
        entry: dict[str, Any] = {"problem": pid, "name": base.get("name", ""), "tags": base.get("tags", [])}
        entry.update({"eager_ms": eager, "compile_ms": comp, "sol_ms": sol, "bound": base.get("bound")})
        entry["baseline_error"] = base.get("error")
        for b in rows:
            if b == "baseline":
                continue
            r = rows[b].get(pid, {"status": "not run"})
            ms = _ms(r, "time")
            entry[b] = {
                "status": r.get("status", "ok"),
                "ms": ms,
                "vs_eager": eager / ms if ms and eager else None,
                "vs_compile": comp / ms if ms and comp else None,
                "sol_fraction": sol / ms if ms and sol else None,
                "error": r.get("error"),
            }
        table.append(entry)
    return table


def summarize(table: list[dict[str, Any]], backends: list[str]) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for b in backends:
        ok = [e for e in table if e[b]["vs_eager"]]
        paired = [e for e in ok if e["compile_ms"]]
        mem = sorted(e[b]["sol_fraction"] for e in ok if e["bound"] == "memory" and e[b]["sol_fraction"])
        summary[b] = {
            "correct": len([e for e in table if e[b]["status"] == "ok"]),
            "geomean_vs_eager": _geomean([e[b]["vs_eager"] for e in ok]),
            "paired_with_compile": len(paired),
            "paired_geomean_vs_eager": _geomean([e[b]["vs_eager"] for e in paired]),
            "compile_geomean_vs_eager": _geomean([e["eager_ms"] / e["compile_ms"] for e in paired]),
            "geomean_vs_compile": _geomean([e[b]["vs_compile"] for e in paired]),
            "median_sol_fraction_memory_bound": mem[len(mem) // 2] if mem else None,
            "not_ok": {e["problem"]: e[b]["status"] for e in table if e[b]["status"] != "ok"},
        }
    return summary


def _summary_line(b: str, s: dict[str, Any]) -> str:
    sol = s["median_sol_fraction_memory_bound"]
    return (
        f"- {b}: {s['correct']} correct; geomean speedup vs eager {_f(s['geomean_vs_eager'], '{:.2f}x')}; "
        f"on the {s['paired_with_compile']} problems with a torch.compile time: {b} "
        f"{_f(s['paired_geomean_vs_eager'], '{:.2f}x')} vs torch.compile "
        f"{_f(s['compile_geomean_vs_eager'], '{:.2f}x')} (geomean over eager), {b} vs compile "
        f"{_f(s['geomean_vs_compile'], '{:.2f}x')}; median fraction of SOL on memory-bound problems "
        f"{_f(sol and 100 * sol, '{:.0f}%')}; not ok: {s['not_ok'] or 'none'}"
    )


def _f(x: float | None, fmt: str = "{:.3f}") -> str:
    return "-" if x is None else fmt.format(x)


def markdown(
    table: list[dict[str, Any]], summary: dict[str, Any], backends: list[str], meta: dict[str, Any]
) -> str:
    lines = [
        f"# Level-2 solutions on {meta.get('gpu') or 'CPU'}, preset {meta.get('preset')}",
        "",
        f"{meta['date']}; torch {meta['torch']}, triton {meta['triton']}, CUDA {meta['cuda']}. Times are "
        "medians in ms (kbench.timing: CUDA events behind a launch spin, L2 flushed, >= 50 calls; IEEE fp32, TF32 off); speedups are eager/solution and "
        "compile/solution; SOL is kbench.analysis.roofline's speed-of-light time.",
        "",
    ]
    head = "| problem | bound | eager | compile | SOL |"
    sep = "|---|---|---|---|---|"
    for b in backends:
        head += f" {b} | {b} vs eager | {b} vs compile | {b} % SOL |"
        sep += "---|---|---|---|"
    lines += [head, sep]
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
            time_cell = _f(r["ms"]) if r["status"] == "ok" else r["status"]
            cells += [
                time_cell,
                _f(r["vs_eager"], "{:.2f}x"),
                _f(r["vs_compile"], "{:.2f}x"),
                _f(r["sol_fraction"] and 100 * r["sol_fraction"], "{:.0f}%"),
            ]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "## Summary", "", *[_summary_line(b, s) for b, s in summary.items()]]
    return "\n".join(lines) + "\n"


def machine() -> dict[str, Any]:
    import torch

    meta: dict[str, Any] = {"date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")}
    meta["torch"], meta["cuda"] = torch.__version__, torch.version.cuda
    meta["gpu"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    try:
        import triton

        meta["triton"] = triton.__version__
    except ImportError:
        meta["triton"] = None
    meta["python"], meta["cpus"] = sys.version.split()[0], os.cpu_count()
    return meta
