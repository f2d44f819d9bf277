"""The numbers a report prints, as labelled rows both the terminal and the HTML page show.

Sections, each saying what it counts (metrics.py has the definitions):
- per problem, first attempt: sample 0, turn 0 of each problem, over the problems the run selected --
  the number upstream KernelBench reports (one verdict per problem);
- per problem, best of k: each problem's best verdict over its k = samples x turns attempts;
- pass@k over samples (the unbiased estimator; a sample passes when any of its turns does);
- every verdict: all samples and turns pooled (not comparable with upstream when k > 1);
- LLM requests: sent, answered from the cache, failed (by reason), tokens, cost and latency.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kbench import metrics as m
from kbench.llm.failures import failure_kind
from kbench.llm.pricing import price
from kbench.report.data import HEADLINE_P, MODES, Series, fmt_fast, fmt_rate, fmt_x

# (mode, p) pairs shown per problem: every headline p against eager, fast_1 against torch.compile.
PROBLEM_FAST = [("eager", p) for p in HEADLINE_P] + [("compile", 1.0)]
Section = tuple[str, list[tuple[str, list[str]]]]  # (title, [(label, one cell per series)])


@dataclass(frozen=True)
class Requests:
    sent: int = 0  # to the server (failures included)
    cached: int = 0  # answered from the response cache
    failed: int = 0
    failures: tuple[tuple[str, int], ...] = ()  # (kind, count), most frequent first
    input_tokens: int = 0  # of sent requests
    output_tokens: int = 0
    cost_usd: float = 0.0
    latency: tuple[float, float, float] | None = None  # median, p90, max seconds of answered requests


def requests_of(series: Series) -> Requests:
    sent = [r for r in series.requests if not r.cached]
    answered = sorted(r.latency_s for r in sent if not r.error)
    latency = None
    if answered:
        p90 = answered[min(len(answered) - 1, int(0.9 * len(answered)))]
        latency = (statistics.median(answered), p90, answered[-1])
    kinds = Counter(failure_kind(r.error) for r in sent if r.error)
    return Requests(
        sent=len(sent),
        cached=len(series.requests) - len(sent),
        failed=sum(kinds.values()),
        failures=tuple(kinds.most_common()),
        input_tokens=sum(r.input_tokens for r in sent),
        output_tokens=sum(r.output_tokens for r in sent),
        cost_usd=sum(r.cost_usd for r in sent),
        latency=latency,
    )


def _count(n: int, of: int) -> str:
    return f"{n}/{of} ({n / of:.0%})" if of else "0"


def _first(s: Series) -> list[tuple[str, str]]:
    records, keys, floor = s.records, list(s.problems), s.floor
    first = m.first_attempts(records)
    rows = [
        ("problems", str(len(keys))),
        ("correct", _count(sum(first[k].ok for k in keys if k in first), len(keys))),
    ]
    for mode, p in PROBLEM_FAST:
        rows.append((f"fast_{p:g} vs {mode}", fmt_fast(m.first_fast_p(records, keys, p, mode, floor))))
    for mode in MODES:
        chosen = [first[k] for k in keys if k in first]
        rows.append((f"geomean speedup vs {mode}", fmt_x(m.geomean_speedup(chosen, mode, floor=floor))))
    return rows


def _best(s: Series) -> list[tuple[str, str]]:
    records, keys, floor = s.records, list(s.problems), s.floor
    every = m.by_problem(records)
    correct = sum(any(v.ok for v in every.get(k, [])) for k in keys)
    rows = [("k = samples × turns", f"{s.samples} × {s.turns}"), ("correct", _count(correct, len(keys)))]
    for mode, p in PROBLEM_FAST:
        rows.append((f"fast_{p:g} vs {mode}", fmt_fast(m.best_fast_p(records, keys, p, mode, floor))))
    for mode in MODES:
        best = m.best_speedups(records, mode)
        rows.append((f"geomean speedup vs {mode}", fmt_x(m.geomean(best[k] for k in keys if k in best))))
    return rows


def _pass(s: Series) -> list[tuple[str, str]]:
    def fast1(v: m.Verdict) -> bool:
        return m.classify(v, 1.0, "eager", s.floor) == "fast"

    def correct(v: m.Verdict) -> bool:
        return v.ok

    rows = []
    for what, passed in (("correct", correct), ("fast_1 vs eager", fast1)):
        counts = m.sample_counts(s.records, passed)
        for k in sorted({1, s.samples}):
            value, n = m.mean_pass_at_k(counts, k), m.pass_at_k_problems(counts, k)
            rows.append(
                (f"pass@{k} ({what})", fmt_rate(value, f" over {n} problems" if value is not None else ""))
            )
    return rows


def _pooled(s: Series) -> list[tuple[str, str]]:
    vs, floor = s.verdicts, s.floor
    rows = [("verdicts", str(len(vs))), ("correct", _count(sum(v.ok for v in vs), len(vs)))]
    rows += [(f"fast_1 vs {mode}", fmt_fast(m.fast_p(vs, 1.0, mode, floor))) for mode in MODES]
    rows += [
        (f"geomean speedup vs {mode}", fmt_x(m.geomean_speedup(vs, mode, floor=floor))) for mode in MODES
    ]
    checked, general = m.generalization(vs)
    if checked:  # --hidden-shapes: correct at unseen sizes too
        rows.append(("generalizes (hidden sizes)", _count(general, checked)))
    sol = m.mean_sol_fraction(vs)
    return rows + ([("mean fraction of speed-of-light", f"{sol:.0%}")] if sol is not None else [])


def _requests(s: Series) -> list[tuple[str, str]]:
    r = requests_of(s)
    failed = str(r.failed) + (f" ({', '.join(f'{k} ×{n}' for k, n in r.failures)})" if r.failures else "")
    latency = "–" if r.latency is None else " / ".join(f"{x:.2f} s" for x in r.latency)
    return [
        ("sent to the server", str(r.sent)),
        ("answered from the cache", str(r.cached)),
        ("failed", failed),
        ("tokens in / out (sent)", f"{r.input_tokens:,} / {r.output_tokens:,}"),
        (
            "cost",
            f"${r.cost_usd:.4f}" if price(s.model) or r.cost_usd else f"– (no price known for {s.model})",
        ),
        ("latency median / p90 / max", latency),
    ]


def _section(
    title: str, series: Sequence[Series], rows_of: Callable[[Series], list[tuple[str, str]]]
) -> Section:
    per = [rows_of(s) for s in series]
    labels = [label for label, _ in per[0]] if per else []
    return title, [(label, [dict(rows).get(label, "–") for rows in per]) for label in labels]


def sections(series: Sequence[Series]) -> list[Section]:
    """Every section of the headline, one cell per series in each row."""
    out = [
        _section(
            "first attempt per problem (s0 t0), as upstream KernelBench",
            series,
            _first,
        ),
        _section("best of k attempts per problem", series, _best),
        _section("pass@k over samples (unbiased estimator)", series, _pass),
        _section("all verdicts pooled (samples and turns)", series, _pooled),
    ]
    if any(s.requests for s in series):
        out.append(_section("LLM requests", series, _requests))
    return out


def turn_rows(series: Series) -> list[list[str]]:
    """Per turn: verdicts, correct, fast_1 vs eager and compile, geomean vs eager (all samples)."""
    rows = []
    for turn, vs in m.breakdown(series.records, m.by_turn, lambda vs: vs).items():
        f = series.floor
        rows.append(
            [turn, str(len(vs)), _count(sum(v.ok for v in vs), len(vs)), fmt_fast(m.fast_p(vs, 1.0, "eager", f)),
             fmt_fast(m.fast_p(vs, 1.0, "compile", f)), fmt_x(m.geomean_speedup(vs, "eager", floor=f))]
        )  # fmt: skip
    return rows


TURN_HEADER = ["turn", "verdicts", "correct", "fast_1 vs eager", "fast_1 vs compile", "geomean vs eager"]


def rule(series: Sequence[Series]) -> str:
    """The fast_p rule in one sentence, with the noise floor(s) in use."""
    floors = " / ".join(sorted({f"{s.floor:.1%}" for s in series})) or "–"
    return (
        f"fast_p: correct, and the lower end of the 95 % speedup interval divided by (1 + noise floor "
        f"{floors}) is above p; +N? = uncertain (the widened interval contains p), counted as not fast"
    )
