"""What a report shows, read from the store only (no GPU, no API key): series of verdicts and their facts.

A series is one model in one run, so a report of several runs (or one run of several models) compares
them side by side. Besides its verdicts a series carries the problems the run selected (the per-problem
metrics' denominator) and their levels, the run's LLM requests and the messages it sent the model, its
noise floor and the protocol that judged its correctness (protocols.py). `Options` say which protocols'
fast_p rules, which thresholds p and which k a report shows.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kbench import metrics as m
from kbench.config import NOISE_FLOOR, RunConfig
from kbench.errors import ConfigError
from kbench.protocols import DEFAULT, PROTOCOLS, Protocol, get_protocol, parse_protocols
from kbench.store import (
    MessageRecord,
    ProblemMeta,
    RequestRecord,
    RunInfo,
    Store,
    StoredVerdict,
    TranscriptStep,
)

_KEY_RE = re.compile(r":(\d+)/(\d+)$")
MODES = ("eager", "compile")
HEADLINE_P = (0.0, 1.0, 2.0)
UPSTREAM_P = (
    0.0,
    0.5,
    0.8,
    1.0,
    1.5,
    2.0,
)  # the thresholds upstream's scripts/benchmark_eval_analysis.py prints
MessageKey = tuple[str, int, int]  # problem, sample, turn


@dataclass(frozen=True)
class Options:
    """What a report shows besides the verdicts: the protocols whose fast_p rules it applies (each
    section says which), the thresholds p of its per-level tables, and the k of pass@k (None: 1 and n)."""

    protocols: tuple[Protocol, ...] = tuple(PROTOCOLS.values())
    thresholds: tuple[float, ...] = UPSTREAM_P
    ks: tuple[int, ...] | None = None


def _numbers(text: str, what: str, kind: type) -> tuple[Any, ...]:
    try:
        values = tuple(kind(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise ConfigError(f"{what}: expected comma-separated numbers, got {text!r}") from None
    if not values or any(v < 0 for v in values):
        raise ConfigError(f"{what}: expected one or more numbers >= 0, got {text!r}")
    return values


def parse_ks(text: str | None) -> tuple[int, ...] | None:
    """`1,2,4` -> the k of pass@k (None for no text); each k >= 1."""
    k = _numbers(text, "--k", int) if text else None
    if k is not None and min(k) < 1:
        raise ConfigError(f"--k: pass@k needs k >= 1, got {text!r}")
    return k


def parse_options(protocols: str, thresholds: str, ks: str | None) -> Options:
    """Options from the command line's text: `kbench,kernelbench`, `0,0.5,1`, `1,2,4`."""
    return Options(tuple(parse_protocols(protocols)), _numbers(thresholds, "--p", float), parse_ks(ks))


@dataclass(frozen=True)
class Row:
    stored: StoredVerdict
    record: m.Record
    anchor: str  # HTML id of the verdict's details


@dataclass(frozen=True)
class Series:
    label: str
    run: RunInfo
    model: str
    rows: tuple[Row, ...]
    problems: tuple[str, ...] = ()  # the problems the run selected: per-problem metrics' denominator
    requests: tuple[RequestRecord, ...] = ()  # the LLM requests of this model in the run
    floor: float = NOISE_FLOOR  # the run's noise floor (metrics.py)
    levels: tuple[tuple[str, int], ...] = ()  # problem -> level, for every selected problem
    messages: tuple[MessageRecord, ...] = ()  # what the run told this model, per turn
    store: Path | None = None  # the results database it was read from, unless it is the default one
    transcript: tuple[TranscriptStep, ...] = ()  # an agent run's sessions, every step (report/transcripts.py)

    @property
    def protocol(self) -> Protocol:
        """The protocol that judged the verdicts' correctness (kbench's for runs stored before protocols)."""
        return get_protocol(str(self.run.config.get("protocol") or DEFAULT))

    def rule(self, protocol: Protocol) -> m.FastRule:
        """`protocol`'s fast_p rule with this series' noise floor."""
        return protocol.fast_rule(self.floor)

    @property
    def judged(self) -> str:
        """How correctness was judged, in one line (protocol, dtype, tolerance, seeds)."""
        seeds = self.run.config.get("seeds")
        dtype = str(self.run.config.get("dtype") or "fp32")
        return self.protocol.correctness(dtype, seeds if isinstance(seeds, int) else 3)

    def level_of(self, key: str) -> int:
        return dict(self.levels).get(key, _level(None, key))

    @property
    def solved(self) -> int:
        """Problems with an ok verdict in the series."""
        return len({r.record.problem_key for r in self.rows if r.stored.verdict.ok})

    def told(self) -> dict[MessageKey, list[MessageRecord]]:
        out: dict[MessageKey, list[MessageRecord]] = {}
        for msg in self.messages:
            out.setdefault((msg.problem_key, msg.sample, msg.turn), []).append(msg)
        return out

    @property
    def expected(self) -> int | None:
        """Verdicts a complete model run holds (problems x samples x turns); None for shipped solutions,
        whose problems may have a solution for one backend and not another."""
        if not self.run.config.get("model") or self.run.config.get("solution_backends"):
            return None
        return len(self.problems) * self.samples * self.turns

    @property
    def verdicts(self) -> list[m.Verdict]:
        return [r.stored.verdict for r in self.rows]

    @property
    def records(self) -> list[m.Record]:
        return [r.record for r in self.rows]

    def _configured(self, name: str, seen: int) -> int:
        value = self.run.config.get(name)
        return value if isinstance(value, int) and value > 0 else seen

    @property
    def samples(self) -> int:
        """Samples per problem: as configured, else as many as the verdicts show."""
        return self._configured("samples", max((r.record.sample for r in self.rows), default=0) + 1)

    @property
    def turns(self) -> int:
        return self._configured("turns", max((r.record.turn for r in self.rows), default=0) + 1)

    @property
    def where(self) -> str:
        """What the numbers come from, e.g. "CPU, small, fp32" or "GPU NVIDIA H200, full, fp32"."""
        vs, config = self.verdicts, self.run.config
        devices = {v.device.split(":")[0] for v in vs} or {str(config.get("device", "?"))}
        gpu = self.run.hardware.get("gpu")
        kinds = sorted({"CPU" if d == "cpu" else f"GPU {gpu}" if gpu else "GPU" for d in devices})
        presets = sorted({v.preset for v in vs} or {str(config.get("preset", "?"))})
        dtypes = sorted({v.dtype for v in vs} or {str(config.get("dtype", "?"))})
        return ", ".join(["/".join(kinds), "/".join(presets), "/".join(dtypes)])


def _level(meta: ProblemMeta | None, key: str) -> int:
    if meta is not None:
        return meta.level
    match = _KEY_RE.search(key)
    return int(match.group(1)) if match else 0


def _record(s: StoredVerdict, meta: ProblemMeta | None) -> m.Record:
    k = s.key
    tags = meta.tags if meta else ()
    return m.Record(k.problem_key, s.verdict, k.model, k.sample, k.turn, _level(meta, k.problem_key), tags)


def _named_store(store: Store) -> Path | None:
    """The store's path where a command must name it (`--store`): None for the configured default."""
    default = RunConfig.model_fields["store"].default
    return None if store.path.resolve() == Path(default).resolve() else store.path


def _floor(info: RunInfo) -> float:
    value = info.config.get("noise_floor")
    return float(value) if isinstance(value, int | float) else NOISE_FLOOR


def load_series(
    store: Store, run_ids: Sequence[str], floor: float | None = None, generalizes: str | None = None
) -> list[Series]:
    """One series per (run, model), in the order the runs were given. `floor` replaces the runs' own
    noise floors (config `noise_floor`); with `generalizes` (a key of metrics.GENERALIZES) only the
    verdicts whose hidden-shape result it names."""
    if generalizes is not None:
        m.filter_generalizes([], generalizes)  # an unknown name fails before the store is read
    problems = store.problems()
    out: list[Series] = []
    for run_index, run_id in enumerate(run_ids):
        info = store.run(run_id)
        by_model: dict[str, list[Row]] = {}
        for i, s in enumerate(store.records(run_id)):
            rec = _record(s, problems.get(s.key.problem_key))
            if generalizes is not None and not m.filter_generalizes([rec], generalizes):
                continue
            by_model.setdefault(s.key.model, []).append(Row(s, rec, f"v{run_index}-{i}"))
        models = by_model or {str(info.config.get("model", "")): []}
        selected, requests = store.run_problems(run_id), tuple(store.requests(run_id))
        messages = tuple(store.messages(run_id))
        transcript = tuple(store.transcript(run_id))
        for model, rows in models.items():
            label = f"{model or '(no model)'} · {run_id}" if len(run_ids) > 1 or len(models) > 1 else model
            keys = selected or sorted({r.record.problem_key for r in rows})
            asked = model == info.config.get("model")  # a run asks one model
            used = _floor(info) if floor is None else floor
            levels = tuple((k, _level(problems.get(k), k)) for k in keys)
            out.append(
                Series(label or run_id, info, model, tuple(rows), tuple(keys), requests if asked else (),
                       used, levels, messages if asked else (), _named_store(store),
                       transcript if asked else ())
            )  # fmt: skip
    return out


def fmt_x(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}×"


def fmt_geomean(g: m.GeoMean, what: str = "problems") -> str:
    """A geometric mean with the number of values it covers: `1.37× over 2 problems`."""
    noun = what.removesuffix("s") if g.n == 1 else what
    return f"– (0 {what})" if g.value is None else f"{g.value:.2f}× over {g.n} {noun}"


def fmt_fast(f: m.FastP) -> str:
    text = f"{f.rate:.0%} ({f.fast}/{f.n})"
    return text + (f" +{f.uncertain}?" if f.uncertain else "")


def fmt_speedup(s: m.Speedup | None) -> str:
    if s is None:
        return "–"
    return f"{s.value:.2f}× [{s.low:.2f}, {s.high:.2f}]"


def fmt_rate(value: float | None, extra: str = "") -> str:
    return "–" if value is None else f"{value:.0%}{extra}"
