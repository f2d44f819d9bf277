"""Export a run's verdicts: JSON Lines (everything, nested) or CSV (one flat row per verdict).

A CSV row carries what a spreadsheet needs to redo the report's numbers: the problem's level and tags,
the run's protocol and noise floor, speedups on medians (kbench's) and on means (upstream KernelBench's)
with the median's 95 % interval, and each verdict's class at p = 1 under both protocols' fast_p rules
(fast, uncertain, slow, untimed, incorrect: metrics.py). Messages, in both formats and in the HTML report,
are cut to whole lines and carry no host paths: a build error's message is its first compiler errors in
the candidate's own files.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kbench import metrics as m
from kbench.prompts.logs import compiler_errors, strip_paths, whole_lines
from kbench.protocols import DEFAULT, PROTOCOLS, Protocol, get_protocol
from kbench.store.codec import to_dict
from kbench.store.db import Store
from kbench.store.records import ProblemMeta, StoredVerdict
from kbench.types import Status, Verdict

MODES = ("eager", "compile")
CSV_COLUMNS = (
    "run_id", "problem_key", "level", "tags", "sample", "turn", "backend", "model", "status", "rule", "message",
    "preset", "dtype", "device", "protocol", "noise_floor", "median_ms", "mean_ms", "rse", "meaningful",
    "eager_ms", "compile_ms", "eager_mean_ms", "compile_mean_ms",
    "speedup_eager", "speedup_eager_low", "speedup_eager_high",
    "speedup_compile", "speedup_compile_low", "speedup_compile_high",
    "speedup_eager_mean", "speedup_compile_mean",
    *(f"class_1_{mode}_{name}" for name in PROTOCOLS for mode in MODES),
    "sol_ms", "sol_fraction", "candidate_digest", "seconds", "created_at",
)  # fmt: skip


@dataclass(frozen=True)
class Context:
    """What a flat row needs beside the verdict: the problems' metadata and the run's rules."""

    problems: Mapping[str, ProblemMeta]
    protocol: Protocol = PROTOCOLS["kbench"]
    floor: float = m.NOISE_FLOOR

    @classmethod
    def of(cls, store: Store, run_id: str) -> Context:
        """The context of one stored run: its problems' metadata, protocol and noise floor."""
        config = store.run(run_id).config
        floor = config.get("noise_floor")
        return cls(
            store.problems(),
            get_protocol(str(config.get("protocol") or DEFAULT)),
            float(floor) if isinstance(floor, int | float) else m.NOISE_FLOOR,
        )


def message(v: Verdict) -> str:
    """A verdict's message for a table: whole lines, no host paths; a build error's own compiler errors."""
    if v.status is Status.BUILD_ERROR:
        log = v.build.log if v.build is not None and v.build.log else ""
        errors = compiler_errors(log) or compiler_errors(v.message)
        if errors:
            return errors
    return strip_paths(whole_lines(v.message)).strip()


def full_row(s: StoredVerdict) -> dict[str, Any]:
    """Everything stored of a verdict, its message cleaned as `message` cleans it (the log tail and the
    build log keep the raw text)."""
    k = s.key
    return {
        "run_id": s.run_id,
        "problem_key": k.problem_key,
        "sample": k.sample,
        "turn": k.turn,
        "backend": k.backend,
        "model": k.model,
        "created_at": s.created_at,
        "verdict": to_dict(s.verdict) | {"message": message(s.verdict)},
        "candidate_source": s.candidate_source,
        "completion_text": s.completion_text,
    }


def _timings(v: Verdict) -> dict[str, Any]:
    row: dict[str, Any] = {}
    if v.timing is not None:
        t = v.timing
        row |= {"median_ms": t.median_ms, "mean_ms": t.mean_ms, "rse": t.rse, "meaningful": t.meaningful}
    for mode in MODES:
        base = v.baseline(mode)
        row |= {f"{mode}_ms": base.median_ms, f"{mode}_mean_ms": base.mean_ms} if base else {}
        sp, mean = m.speedup(v, mode), m.speedup(v, mode, "mean")
        if sp is not None:
            row |= {
                f"speedup_{mode}": sp.value,
                f"speedup_{mode}_low": sp.low,
                f"speedup_{mode}_high": sp.high,
            }
        if mean is not None:
            row[f"speedup_{mode}_mean"] = mean.value
    return row


def flat_row(s: StoredVerdict, ctx: Context | None = None) -> dict[str, Any]:
    ctx = ctx or Context({})
    v, k = s.verdict, s.key
    meta = ctx.problems.get(k.problem_key)
    row: dict[str, Any] = {"run_id": s.run_id, "created_at": s.created_at, "seconds": round(v.seconds, 3)}
    row |= {"problem_key": k.problem_key, "level": meta.level if meta else None}
    row |= {"tags": " ".join(meta.tags) if meta else "", "sample": k.sample, "turn": k.turn}
    row |= {"backend": k.backend, "model": k.model, "status": v.status.value, "rule": v.rule}
    row |= {"message": message(v), "preset": v.preset, "dtype": v.dtype, "device": v.device}
    row |= {"protocol": ctx.protocol.name, "noise_floor": ctx.floor}
    row |= {"sol_ms": v.sol_ms, "sol_fraction": m.sol_fraction(v), "candidate_digest": v.candidate_digest}
    row |= _timings(v)
    for name, protocol in PROTOCOLS.items():
        for mode in MODES:
            row[f"class_1_{mode}_{name}"] = m.speed_kind(v, 1.0, mode, protocol.fast_rule(ctx.floor))
    return {c: row.get(c) for c in CSV_COLUMNS}


def to_jsonl(records: Iterable[StoredVerdict], ctx: Context | None = None) -> str:
    return "".join(json.dumps(full_row(s), sort_keys=True, default=str) + "\n" for s in records)


def to_csv(records: Iterable[StoredVerdict], ctx: Context | None = None) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for s in records:
        writer.writerow({k: "" if v is None else v for k, v in flat_row(s, ctx).items()})
    return buf.getvalue()
