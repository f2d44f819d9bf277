"""Reference timings (baselines): measure and store them, reuse them, and move them to and from upstream
KernelBench's JSON (`results/timing/<hw>/baseline_time_*.json`: level -> file name -> mean/std/min/max/
num_trials/hardware/device, in milliseconds; its scripts/benchmark_eval_analysis.py reads `mean`).
An exported entry also holds `median`, the time kbench's speedups divide, so every number is named as
the statistic it is.

A stored baseline is reused only for the same problem, preset, dtype, mode, hardware fingerprint and
torch version: a timing from another GPU, driver or torch is never silently mixed in.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kbench.baselines.modes import MODES, check_modes
from kbench.errors import ConfigError
from kbench.store import Store
from kbench.types import Problem, TimingStats, UpstreamFacts

UPSTREAM_FILES = {name: m.upstream_file for name, m in MODES.items()}  # kbench mode -> upstream file name
_LEVEL_RE = re.compile(r"^level_?(\d+)$")
_FILE_RE = re.compile(r"^(\d+)_(.+?)(?:\.py)?$")

# Times a problem's reference in the given modes: (problem, preset, dtype, modes) -> {mode: stats}.
Timer = Callable[[Problem, str, str, Sequence[str]], dict[str, TimingStats]]


@dataclass(frozen=True)
class Where:
    """Which stored baselines apply: the measurement conditions, not the problem."""

    preset: str
    dtype: str
    fingerprint: str
    torch_version: str


@dataclass(frozen=True)
class BaselineOutcome:
    problem_key: str
    mode: str
    stats: TimingStats
    reused: bool


def stored_baselines(
    store: Store, problem_key: str, modes: Sequence[str], where: Where
) -> dict[str, TimingStats]:
    """The stored baselines that apply to `where`, by mode (modes without one are left out)."""
    out = {}
    for mode in modes:
        stats = store.get_baseline(
            problem_key, where.preset, where.dtype, mode, where.fingerprint, where.torch_version
        )
        if stats is not None:
            out[mode] = stats
    return out


def measure(
    store: Store,
    problems: Sequence[Problem],
    modes: Sequence[str],
    timer: Timer,
    where: Where,
    force: bool = False,
) -> list[BaselineOutcome]:
    """Time each problem's reference in every mode without a stored baseline (all modes with `force`)."""
    modes = check_modes(modes, timed=True)
    out: list[BaselineOutcome] = []
    for p in problems:
        have = {} if force else stored_baselines(store, p.key, modes, where)
        out += [BaselineOutcome(p.key, m, have[m], True) for m in modes if m in have]
        missing = [m for m in modes if m not in have]
        if not missing:
            continue
        got = timer(p, where.preset, where.dtype, missing)
        for mode in missing:
            if mode not in got:
                raise ConfigError(f"the baseline timer returned no '{mode}' timing for {p.key}")
            store.put_baseline(
                p.key, where.preset, where.dtype, mode, where.fingerprint, where.torch_version, got[mode]
            )
            out.append(BaselineOutcome(p.key, mode, got[mode], False))
    return out


# upstream KernelBench JSON -------------------------------------------------------------------------------


def mode_of(path: Path) -> str:
    for mode, name in UPSTREAM_FILES.items():
        if path.name == name:
            return mode
    raise ConfigError(
        f"{path.name}: not an upstream baseline file name; pass --mode ({', '.join(UPSTREAM_FILES)})"
    )


UPSTREAM_METHOD = "upstream"  # TimingStats.method of imported timings


def from_upstream(entry: dict[str, Any]) -> TimingStats:
    """Upstream records the mean (not the median) of num_trials wall-clock CUDA-event times, in ms; a
    file kbench wrote also holds the `median`. Without one, the mean stands in for it, marked so that
    an export never writes it back as a median."""
    mean, std, n = float(entry["mean"]), float(entry.get("std", 0.0)), int(entry.get("num_trials", 1))
    rse = std / mean / math.sqrt(n) if mean > 0 and n > 0 else 0.0
    facts = UpstreamFacts(
        hardware=str(entry.get("hardware", "")),
        max_ms=float(entry["max"]) if "max" in entry else None,
        median_known="median" in entry,
    )
    return TimingStats(
        median_ms=float(entry.get("median", mean)),
        mean_ms=mean,
        std_ms=std,
        iqr_ms=0.0,
        min_ms=float(entry.get("min", mean)),
        n=n,
        rse=rse,
        device=str(entry.get("device", "cuda")),
        method=UPSTREAM_METHOD,
        upstream=facts,
    )


def to_upstream(stats: TimingStats, hardware: str) -> dict[str, Any]:
    """Upstream's fields, each holding the statistic it names: `mean` (what upstream's analysis divides),
    std, min, `max` only where known (kbench's timings keep none), num_trials, hardware, device; and
    `median`, the time kbench's own speedups divide, under its own name (upstream's scripts ignore it)."""
    facts = stats.upstream or UpstreamFacts()
    out: dict[str, Any] = {"mean": stats.mean_ms, "std": stats.std_ms, "min": stats.min_ms}
    out |= {"max": facts.max_ms} if facts.max_ms is not None else {}
    out |= {"num_trials": stats.n, "hardware": hardware, "device": stats.device}
    known = stats.method != UPSTREAM_METHOD or facts.median_known
    return out | ({"median": stats.median_ms} if known else {})


def parse_upstream(data: dict[str, Any], source: str, where: str) -> dict[str, TimingStats]:
    """{problem_key: stats} from one upstream file; keys are `SOURCE:LEVEL/NUMBER`."""
    out: dict[str, TimingStats] = {}
    for level_name, problems in data.items():
        level = _LEVEL_RE.match(level_name)
        if level is None or not isinstance(problems, dict):
            raise ConfigError(
                f"{where}: expected 'level1', 'level2', ... at the top level, got {level_name!r}"
            )
        for file_name, entry in problems.items():
            number = _FILE_RE.match(file_name)
            if number is None or not isinstance(entry, dict) or "mean" not in entry:
                raise ConfigError(
                    f"{where}: {level_name}/{file_name}: expected 'N_Name.py' with a 'mean' in ms"
                )
            out[f"{source}:{int(level.group(1))}/{int(number.group(1))}"] = from_upstream(entry)
    return out


def import_upstream(
    store: Store, path: Path, where: Where, source: str = "hf", mode: str | None = None
) -> int:
    """Store every timing of one upstream file under `where`; returns how many were stored."""
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read upstream baseline JSON ({exc})") from None
    mode = mode or mode_of(path)
    check_modes([mode])
    parsed = parse_upstream(data, source, str(path))
    for key, stats in parsed.items():
        store.put_baseline(
            key, where.preset, where.dtype, mode, where.fingerprint, where.torch_version, stats
        )
    return len(parsed)


def export_upstream(
    store: Store, out_dir: Path, where: Where, hardware: str, modes: Sequence[str]
) -> list[Path]:
    """Write one upstream-shaped file per mode; problems need stored metadata for their file names."""
    names = store.problems()
    written = []
    for mode in check_modes(modes):
        data: dict[str, dict[str, Any]] = {}
        for (key, preset, dtype, m, _fp, tv), stats in store.baselines(where.fingerprint):
            meta = names.get(key)
            if (m, preset, dtype, tv) != (
                mode,
                where.preset,
                where.dtype,
                where.torch_version,
            ) or meta is None:
                continue
            data.setdefault(f"level{meta.level}", {})[f"{meta.number}_{meta.name}.py"] = to_upstream(
                stats, hardware
            )
        if data:
            out_dir.mkdir(parents=True, exist_ok=True)
            path = out_dir / UPSTREAM_FILES[mode]
            path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
            written.append(path)
    return written
