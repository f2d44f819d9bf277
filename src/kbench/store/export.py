"""Export a run's verdicts: JSON Lines (everything, nested) or CSV (one flat row per verdict)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable
from typing import Any

from kbench import metrics as m
from kbench.store.codec import to_dict
from kbench.store.db import StoredVerdict

CSV_COLUMNS = (
    "run_id", "problem_key", "sample", "turn", "backend", "model", "status", "rule", "message",
    "preset", "dtype", "device", "median_ms", "rse", "meaningful", "eager_ms", "compile_ms",
    "speedup_eager", "speedup_eager_low", "speedup_eager_high",
    "speedup_compile", "speedup_compile_low", "speedup_compile_high",
    "sol_ms", "sol_fraction", "candidate_digest", "seconds", "created_at",
)  # fmt: skip


def full_row(s: StoredVerdict) -> dict[str, Any]:
    k = s.key
    return {
        "run_id": s.run_id,
        "problem_key": k.problem_key,
        "sample": k.sample,
        "turn": k.turn,
        "backend": k.backend,
        "model": k.model,
        "created_at": s.created_at,
        "verdict": to_dict(s.verdict),
        "candidate_source": s.candidate_source,
        "completion_text": s.completion_text,
    }


def flat_row(s: StoredVerdict) -> dict[str, Any]:
    v, k = s.verdict, s.key
    row: dict[str, Any] = {"run_id": s.run_id, "created_at": s.created_at, "seconds": round(v.seconds, 3)}
    row |= {
        "problem_key": k.problem_key,
        "sample": k.sample,
        "turn": k.turn,
        "backend": k.backend,
        "model": k.model,
    }
    row |= {
        "status": v.status.value,
        "rule": v.rule,
        "message": v.message,
        "preset": v.preset,
        "dtype": v.dtype,
    }
    row |= {"device": v.device, "sol_ms": v.sol_ms, "sol_fraction": m.sol_fraction(v)}
    row["candidate_digest"] = v.candidate_digest
    if v.timing is not None:
        row |= {"median_ms": v.timing.median_ms, "rse": v.timing.rse, "meaningful": v.timing.meaningful}
    for mode in ("eager", "compile"):
        base = v.baseline(mode)
        row[f"{mode}_ms"] = base.median_ms if base else None
        sp = m.speedup(v, mode)
        if sp is not None:
            row |= {
                f"speedup_{mode}": sp.value,
                f"speedup_{mode}_low": sp.low,
                f"speedup_{mode}_high": sp.high,
            }
    return {c: row.get(c) for c in CSV_COLUMNS}


def to_jsonl(records: Iterable[StoredVerdict]) -> str:
    return "".join(json.dumps(full_row(s), sort_keys=True, default=str) + "\n" for s in records)


def to_csv(records: Iterable[StoredVerdict]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for s in records:
        writer.writerow({k: "" if v is None else v for k, v in flat_row(s).items()})
    return buf.getvalue()
