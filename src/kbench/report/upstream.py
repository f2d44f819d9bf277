"""A run's verdicts in upstream KernelBench's file shapes, for its analysis scripts (`kbench export RUN
--format kernelbench --out DIR`). Under DIR, per level L of the run:

    level{L}/eval_results.json        {"<problem id>": [{sample_id, compiled, correctness, metadata,
                                      runtime, runtime_stats}, ...]}, ids in numeric order: what upstream's
                                      scripts/eval_from_generations.py writes and its
                                      scripts/benchmark_eval_analysis.py reads (the sample_id 0 entry of
                                      each problem: compiled, correctness, runtime)
    level{L}/pass_at_k_results.json   {"averages": {"avg_pass@k"}, "metadata": {...}, "problems": {...}}
                                      (eval_from_generations.py's calculate_pass_at_k) when the run
                                      asked for several samples per problem
    level{L}/level_{L}_problem_{P}_sample_{S}_kernel.py   each sample's candidate, named as upstream's
                                      eval_from_generations.py looks kernels up

and baseline_time_torch.json / baseline_time_torch_compile_inductor_default.json: the reference timings
the verdicts were measured against, in upstream's baseline shape (baselines/storage.py). Times are in ms.
`runtime` and a baseline's `mean` are means, as upstream's are; kbench's own speedups divide medians,
which the files carry as `median`. upstream's analysis pairs a level's baselines with its eval results by
position (names only pick a subset), so both list problems in the same order, by number; its numbers mean
something for runs over upstream's problems (a KernelBench folder or `hf`), not kbench's own suite.

Which turn stands for a sample: turn 0 by default (upstream asks once per sample), or each sample's last.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kbench import metrics as m
from kbench.baselines.modes import MODES as BASELINE_MODES
from kbench.baselines.storage import to_upstream
from kbench.store.db import Store
from kbench.store.export import message
from kbench.store.records import ProblemMeta, StoredVerdict
from kbench.types import Status, TimingStats, Verdict

Chosen = dict[str, dict[int, StoredVerdict]]  # problem key -> sample -> the verdict standing for it


def choose(records: Sequence[StoredVerdict], turn: int | None = 0) -> Chosen:
    """Per problem and sample, the verdict of turn `turn` (None: the sample's last turn)."""
    out: Chosen = {}
    for s in records:
        k = s.key
        if turn is not None and k.turn != turn:
            continue
        mine = out.setdefault(k.problem_key, {})
        if k.sample not in mine or mine[k.sample].key.turn < k.turn:
            mine[k.sample] = s
    return out


def runtime_stats(t: TimingStats | None, hardware: str) -> dict[str, Any]:
    """Upstream's runtime_stats of one timing (mean, std, min, num_trials, hardware, device), plus the
    median under its own name; {} when there is no meaningful timing (upstream's `{}` for no timing)."""
    if t is None or not t.meaningful:
        return {}
    stats = {"mean": t.mean_ms, "std": t.std_ms, "min": t.min_ms}
    stats |= {"max": t.upstream.max_ms} if t.upstream is not None and t.upstream.max_ms is not None else {}
    return stats | {"num_trials": t.n, "hardware": hardware, "device": t.device, "median": t.median_ms}


def _metadata(v: Verdict, hardware: str, protocol: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"hardware": hardware, "device": v.device, "kbench_status": v.status.value}
    meta |= {"kbench_protocol": protocol} | ({"kbench_rule": v.rule} if v.rule else {})
    c = v.correctness
    if c is not None and c.seeds:
        passed = len(c.seeds) if c.passed else ("?" if c.seeds_passed is None else c.seeds_passed)
        meta["correctness_trials"] = f"({passed} / {len(c.seeds)})"
    if v.status is Status.MISMATCH and c is not None:
        meta |= {"correctness_issue": "Output mismatch", "max_difference": [f"{c.max_abs_err:.6f}"]}
        meta["avg_difference"] = [f"{c.mean_abs_err:.6f}"]
    elif not m.compiled(v):
        meta["compilation_error"] = message(v)
    elif not v.ok:
        meta["runtime_error"] = message(v)
    return meta


def entry(s: StoredVerdict, hardware: str, protocol: str) -> dict[str, Any]:
    """One sample as upstream's add_to_eval_results_file writes it (runtime -1.0 when not timed)."""
    v = s.verdict
    stats = runtime_stats(v.timing, hardware) if v.ok else {}
    return {
        "sample_id": s.key.sample,
        "compiled": m.compiled(v),
        "correctness": v.ok,
        "metadata": _metadata(v, hardware, protocol),
        "runtime": stats["mean"] if stats else -1.0,
        "runtime_stats": stats,
    }


def eval_results(chosen: Chosen, numbers: Mapping[str, int], hardware: str, protocol: str) -> dict[str, Any]:
    """{"<problem id>": [entries by sample]} for the problems in `numbers` (key -> upstream problem id)."""
    by_id = {numbers[k]: samples for k, samples in chosen.items() if k in numbers}
    return {
        str(pid): [entry(by_id[pid][s], hardware, protocol) for s in sorted(by_id[pid])]
        for pid in sorted(by_id)
    }


def upstream_pass_at_k(n: int, c: int, k: int) -> float:
    """pass@k as upstream's calc_pass_at_k computes it: 1 - prod(1 - k / i) over i = n-c+1 .. n. The
    product, not metrics.pass_at_k's binomials, because the two round differently: of the 1,353,400 cases
    n <= 200, c <= n, k <= n - c, the binomials' float differs from numpy's product in 78,488, this one in
    none."""
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def pass_at_k_results(results: Mapping[str, list[dict[str, Any]]], ks: Sequence[int]) -> dict[str, Any]:
    """Upstream's pass_at_k_results.json (eval_from_generations.py's calculate_pass_at_k) from an
    eval_results mapping, for the k's in `ks` in their order. A sample passes when it compiled and is
    correct. A problem of n samples stores pass@min(k, n) for each k (upstream lowers a k above n to n),
    and avg_pass@k sums the problems that store pass@k and divides by every problem, so a problem with
    fewer than k samples counts 0 there; `pass@k_count` says how many store it."""
    problems: dict[str, dict[str, Any]] = {}
    for pid, entries in results.items():
        n, c = len(entries), sum(bool(e["correctness"] and e["compiled"]) for e in entries)
        problems[pid] = {"total_samples": n, "correct_samples": c}
        problems[pid] |= {f"pass@{min(k, n)}": upstream_pass_at_k(n, c, min(k, n)) for k in ks}
    having = {k: [p[f"pass@{k}"] for p in problems.values() if f"pass@{k}" in p] for k in ks}
    total = len(problems)
    averages = {f"avg_pass@{k}": sum(v) / total for k, v in having.items()} if total else {}
    metadata: dict[str, Any] = {
        "total_problems": total,
        "problems_with_samples": sum(p["total_samples"] > 0 for p in problems.values()),
        "total_evaluated_samples": sum(p["total_samples"] for p in problems.values()),
        "total_correct_samples": sum(p["correct_samples"] for p in problems.values()),
    }
    metadata |= {f"pass@{k}_count": len(v) for k, v in having.items()}
    return {"averages": averages, "metadata": metadata, "problems": problems}


def baseline_files(
    chosen: Chosen, meta: Mapping[str, ProblemMeta], hardware: str
) -> dict[str, dict[str, Any]]:
    """{upstream file name: {"level{L}": {"{P}_{Name}.py": stats}}} from the verdicts' own baselines."""
    out: dict[str, dict[str, Any]] = {}
    number = {k: (p.level, p.number) for k, p in meta.items()}  # eval_results' order: problem numbers
    for key, samples in sorted(chosen.items(), key=lambda item: number.get(item[0], (0, 0))):
        p = meta.get(key)
        for mode, spec in BASELINE_MODES.items():
            found = next((b for s in samples.values() if (b := s.verdict.baseline(mode)) is not None), None)
            if p is None or found is None or not found.meaningful:
                continue
            level = out.setdefault(spec.upstream_file, {}).setdefault(f"level{p.level}", {})
            level[f"{p.number}_{p.name}.py"] = to_upstream(found, hardware)
    return out


def _write(path: Path, data: Any, indent: int = 4) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=indent) + "\n")
    return path


def export(
    store: Store, run_id: str, out_dir: Path, turn: int | None = 0, ks: Sequence[int] = ()
) -> list[Path]:
    """Write the run's files under `out_dir` (module doc); `ks`: the k of pass@k (default 1 and n)."""
    info, meta = store.run(run_id), store.problems()
    chosen = choose(store.records(run_id), turn)
    hardware = str(info.hardware.get("gpu") or "cpu")
    protocol = str(info.config.get("protocol") or "kbench")
    configured = info.config.get("samples")
    asked = configured if isinstance(configured, int) else 0
    written = []
    for level in sorted({meta[k].level for k in chosen if k in meta}):
        numbers = {k: meta[k].number for k in chosen if k in meta and meta[k].level == level}
        results = eval_results(chosen, numbers, hardware, protocol)
        folder = out_dir / f"level{level}"
        written.append(_write(folder / "eval_results.json", results))
        samples = max((len(e) for e in results.values()), default=0)
        if max(asked, samples) > 1:  # upstream writes the file when its run asked for several samples
            at = sorted(set(ks) or {1, max(asked, samples)})
            data = pass_at_k_results(results, at)
            written.append(_write(folder / "pass_at_k_results.json", data, indent=2))
        for key, number in numbers.items():
            for sample, s in chosen[key].items():
                if s.candidate_source:
                    name = f"level_{level}_problem_{number}_sample_{sample}_kernel.py"
                    (folder / name).write_text(s.candidate_source)
    for name, data in baseline_files(chosen, meta, hardware).items():
        written.append(_write(out_dir / name, data))
    return written
