"""The numbers a report prints, as labelled rows both the terminal and the HTML page show.

Sections, each saying what it counts (metrics.py has the definitions) and, where a fast_p rule applies,
which protocol's rule (protocols.py; correctness is always the run's own protocol's, `Series.judged`):
- per problem, first attempt: sample 0, turn 0 of each problem, over the problems the run selected --
  the number upstream KernelBench reports (one verdict per problem);
- per problem, best of k: each problem's best verdict over its k = samples x turns attempts;
- pass@k and fast_p@k over samples (the unbiased estimator; a sample passes when any of its turns does);
- every verdict: all samples and turns pooled (not comparable with upstream when k > 1);
- LLM requests: sent, answered from the cache, failed (by reason), tokens, cost and latency.
Every aggregate shows its n: counts as `c/n`, geometric means as `over n problems`, pass@k as `over n`.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

from kbench import metrics as m
from kbench.llm.failures import failure_kind
from kbench.llm.pricing import price
from kbench.protocols import Protocol
from kbench.report.data import HEADLINE_P, MODES, Options, Series, fmt_fast, fmt_geomean, fmt_rate

# (mode, p) pairs shown per problem: every headline p against eager, fast_1 against torch.compile.
PROBLEM_FAST = [("eager", p) for p in HEADLINE_P] + [("compile", 1.0)]
Rows = list[tuple[str, str]]
Section = tuple[str, list[tuple[str, list[str]]]]  # (title, [(label, one cell per series)])


@dataclass(frozen=True)
class Requests:
    sent: int = 0  # to the server (failures included)
    cached: int = 0  # answered from the response cache
    failed: int = 0  # failures of turns never answered since (a resume that answered them clears them)
    failures: tuple[tuple[str, int], ...] = ()  # (kind, count) of those, most frequent first
    retried: int = 0  # failures whose turn a later request answered
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
    done = {(r.problem_key, r.sample, r.turn) for r in series.requests if not r.error}
    errors = [r for r in sent if r.error]
    open_ = [r for r in errors if (r.problem_key, r.sample, r.turn) not in done]
    kinds = Counter(failure_kind(r.error) for r in open_)
    return Requests(
        sent=len(sent),
        cached=len(series.requests) - len(sent),
        failed=len(open_),
        failures=tuple(kinds.most_common()),
        retried=len(errors) - len(open_),
        input_tokens=sum(r.input_tokens for r in sent),
        output_tokens=sum(r.output_tokens for r in sent),
        cost_usd=sum(r.cost_usd for r in sent),
        latency=latency,
    )


def count(n: int, of: int) -> str:
    return f"{n}/{of} ({n / of:.0%})" if of else "0"


def _judged(s: Series, protocol: Protocol) -> tuple[str, str]:
    """Which protocol's tolerance judged the verdicts counted below the fast_p rule of `protocol`."""
    own = s.protocol.name
    return ("correctness judged by", own if own == protocol.name else f"{own} (not {protocol.name})")


def _first(s: Series, protocol: Protocol) -> Rows:
    records, keys, rule = s.records, list(s.problems), s.rule(protocol)
    first = m.first_attempts(records)
    chosen = [first[k] for k in keys if k in first]
    rows = [
        ("problems", str(len(keys))),
        _judged(s, protocol),
        ("compiled", count(sum(m.compiled(v) for v in chosen), len(keys))),
        ("correct", count(sum(v.ok for v in chosen), len(keys))),
    ]
    for mode, p in PROBLEM_FAST:
        rows.append((f"fast_{p:g} vs {mode}", fmt_fast(m.first_fast_p(records, keys, p, mode, rule))))
    for mode in MODES:
        rows.append(
            (f"geomean speedup vs {mode}", fmt_geomean(m.first_geomean(records, keys, mode, rule.statistic)))
        )
    return rows


def _best(s: Series, protocol: Protocol) -> Rows:
    records, keys, rule = s.records, list(s.problems), s.rule(protocol)
    every = m.by_problem(records)
    correct = sum(any(v.ok for v in every.get(k, [])) for k in keys)
    rows = [("k = samples × turns", f"{s.samples} × {s.turns}"), _judged(s, protocol)]
    rows.append(("correct", count(correct, len(keys))))
    for mode, p in PROBLEM_FAST:
        rows.append((f"fast_{p:g} vs {mode}", fmt_fast(m.best_fast_p(records, keys, p, mode, rule))))
    for mode in MODES:
        rows.append(
            (f"geomean speedup vs {mode}", fmt_geomean(m.best_geomean(records, keys, mode, rule.statistic)))
        )
    return rows


def _at_k(value: m.AtK) -> str:
    return fmt_rate(value.value, f" over {value.n} problems") if value.value is not None else "– (0 problems)"


def ks_of(s: Series, options: Options) -> list[int]:
    """The k of pass@k: as asked, else 1 and the number of samples."""
    return list(options.ks) if options.ks else sorted({1, s.samples})


def _pass(s: Series, options: Options) -> Rows:
    rows = []
    counts = m.sample_counts(s.records)
    for k in ks_of(s, options):
        rows.append((f"pass@{k} (correct)", _at_k(m.at_k(counts, k))))
    for protocol in options.protocols:
        for k in ks_of(s, options):
            value = m.fast_p_at_k(s.records, k, 1.0, "eager", s.rule(protocol))
            rows.append((f"fast_1@{k} vs eager ({protocol.name} rules)", _at_k(value)))
    return rows


def _pooled(s: Series, options: Options) -> Rows:
    vs = s.verdicts
    rows = [("verdicts", str(len(vs))), ("correct", count(sum(v.ok for v in vs), len(vs)))]
    for protocol in options.protocols:
        rule = s.rule(protocol)
        for mode in MODES:
            rows.append(
                (f"fast_1 vs {mode} ({protocol.name} rules)", fmt_fast(m.fast_p(vs, 1.0, mode, rule)))
            )
        for mode in MODES:
            mean = m.geomean_speedup(vs, mode, rule=rule)
            rows.append((f"geomean speedup vs {mode} ({protocol.name} rules)", fmt_geomean(mean, "verdicts")))
    checked, general = m.generalization(vs)
    if checked:  # --hidden-shapes: correct at unseen sizes too
        rows.append(("generalizes (hidden sizes)", count(general, checked)))
    sol = m.mean_sol_fraction(vs)
    if sol.value is None:
        return rows
    noun = "verdict" if sol.n == 1 else "verdicts"
    return [*rows, ("mean fraction of speed-of-light", f"{sol.value:.0%} over {sol.n} {noun}")]


def _requests(s: Series) -> Rows:
    r = requests_of(s)
    failed = str(r.failed) + (f" ({', '.join(f'{k} ×{n}' for k, n in r.failures)})" if r.failures else "")
    latency = "–" if r.latency is None else " / ".join(f"{x:.2f} s" for x in r.latency)
    return [
        ("sent to the server", str(r.sent)),
        ("answered from the cache", str(r.cached)),
        ("failed", failed),
        ("failed, then answered on a retry", str(r.retried)),
        ("tokens in / out (sent)", f"{r.input_tokens:,} / {r.output_tokens:,}"),
        (
            "cost",
            f"${r.cost_usd:.4f}" if price(s.model) or r.cost_usd else f"– (no price known for {s.model})",
        ),
        ("latency median / p90 / max", latency),
    ]


def _section(title: str, series: Sequence[Series], rows_of: Callable[[Series], Rows]) -> Section:
    per = [rows_of(s) for s in series]
    labels = [label for label, _ in per[0]] if per else []
    return title, [(label, [dict(rows).get(label, "–") for rows in per]) for label in labels]


def sections(series: Sequence[Series], options: Options | None = None) -> list[Section]:
    """Every section of the headline, one cell per series in each row."""
    options = options or Options()
    out = []
    for protocol in options.protocols:
        title = f"first attempt per problem (s0 t0), as upstream KernelBench counts · {protocol.name} rules"
        out.append(_section(title, series, partial(_first, protocol=protocol)))
    for protocol in options.protocols:
        title = f"best of k attempts per problem · {protocol.name} rules"
        out.append(_section(title, series, partial(_best, protocol=protocol)))
    out.append(_section("pass@k over samples (unbiased estimator)", series, partial(_pass, options=options)))
    out.append(_section("all verdicts pooled (samples and turns)", series, partial(_pooled, options=options)))
    if any(s.requests for s in series):
        out.append(_section("LLM requests", series, _requests))
    return out


def turn_rows(series: Series, protocol: Protocol) -> list[list[str]]:
    """Per turn: verdicts, correct, fast_1 vs eager and compile, geomean vs eager (all samples)."""
    rows, rule = [], series.rule(protocol)
    for turn, vs in m.breakdown(series.records, m.by_turn, lambda vs: vs).items():
        rows.append(
            [turn, str(len(vs)), count(sum(v.ok for v in vs), len(vs)), fmt_fast(m.fast_p(vs, 1.0, "eager", rule)),
             fmt_fast(m.fast_p(vs, 1.0, "compile", rule)),
             fmt_geomean(m.geomean_speedup(vs, "eager", rule=rule), "verdicts")]
        )  # fmt: skip
    return rows


TURN_HEADER = ["turn", "verdicts", "correct", "fast_1 vs eager", "fast_1 vs compile", "geomean vs eager"]


def rules(series: Sequence[Series], options: Options | None = None) -> list[str]:
    """Each protocol's fast_p rule in one line, with the noise floor(s) in use, then how each series'
    correctness was judged."""
    options = options or Options()
    floors = sorted({s.floor for s in series}) or [0.01]
    lines = []
    for protocol in options.protocols:
        described = " / ".join(dict.fromkeys(protocol.fast_rule(f).describe() for f in floors))
        lines.append(f"fast_p, {protocol.name} rules ({protocol.source}): {described}")
    lines += [f"correctness of {s.label or s.run.run_id}: {s.judged}" for s in series]
    return lines


def rule(series: Sequence[Series], options: Options | None = None) -> str:
    return "; ".join(rules(series, options))
