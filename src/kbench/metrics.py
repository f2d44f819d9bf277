"""Metrics over verdicts: pure functions, no I/O.

Speedup and its uncertainty. speedup = baseline time / candidate time, where the time is the median
(kbench's rule) or the mean (upstream KernelBench's: its `runtime` is the mean of its timed trials) of a
timed callable. Both times carry a relative standard error (TimingStats.rse); the ratio's relative error
is taken as sqrt(rse_b^2 + rse_c^2) and the 95 % interval is speedup * exp(+-1.96 * that), symmetric in
log space because a ratio is.

Hidden shapes: with `--hidden-shapes` an `ok` verdict also says whether the candidate was correct at sizes
it never saw (`Verdict.generalizes`: True, False, or None when not checked). `GENERALIZES` names the
subsets a report can be restricted to; `generalization` counts the checked ones.

Two fast_p rules (`FastRule`), each stated once here and used everywhere:

- kbench's (`KBENCH_RULE`, medians): a verdict is *fast at p* when it is correct, both timings are
  meaningful, and the lower end of its 95 % speedup interval, widened by the noise floor f, is strictly
  above p: low / (1 + f) > p (`>`, so a speedup of exactly p is not fast). The interval comes from the
  timings' spread within their processes; f (default 1 %, config `noise_floor`) is the spread between
  processes that it does not see, so a 1.001x speedup with a tight interval is not fast at 1. A correct
  verdict whose widened interval contains p (low / (1 + f) <= p < high * (1 + f)) is *uncertain*: it
  counts as not fast, and fast_p reports how many there were, so a threshold that sits inside the noise
  is visible instead of silently flipping verdicts.
- upstream KernelBench's (`UPSTREAM_RULE`, means): correct and speedup > p, nothing else; no verdict is
  uncertain.

Under both, correct verdicts without a usable speedup (no baseline for that mode, or interpreter timings)
are *untimed* and never fast, so fast_0 equals the correctness rate exactly when every correct verdict was
timed.

Per problem (comparable with upstream KernelBench, which reports one number per problem): `first_*`
takes each problem's first attempt (sample 0, turn 0); `best_*` its best verdict over every sample and
turn (best-of-k). Both divide by the number of problems the run selected; a problem without a verdict
(its request failed) counts as not correct and not fast. pass@k (and fast_p@k: pass@k where a sample
passes when it is fast at p) is the unbiased estimator over samples. Every aggregate carries its n: the
problems or verdicts it counts (`FastP.n`, `GeoMean.n`, `Mean.n`, `AtK.n`).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from kbench.config import NOISE_FLOOR
from kbench.errors import ConfigError
from kbench.types import Status, TimingStats, Verdict

Z95 = 1.96
T = TypeVar("T")
# Kinds from best to worst: a problem's best-of-k kind is the best of its verdicts' kinds.
KINDS = ("fast", "uncertain", "slow", "untimed", "incorrect", "missing")
STATISTICS = ("median", "mean")  # the time a speedup divides
# Statuses upstream KernelBench records as compiled=False: no kernel source, or none that built and loaded.
NOT_COMPILED = frozenset({Status.NO_CODE, Status.STATIC_REJECT, Status.BUILD_ERROR, Status.LOAD_ERROR})


@dataclass(frozen=True)
class FastRule:
    """How a correct, timed verdict is judged fast at p (the module doc states both rules)."""

    statistic: str = "median"  # median | mean
    interval: bool = True  # kbench: the widened 95 % interval's low end > p; False: speedup > p
    floor: float = NOISE_FLOOR  # the noise floor f (interval rule only)

    def __post_init__(self) -> None:
        if self.statistic not in STATISTICS:
            raise ConfigError(f"unknown statistic {self.statistic!r}; use one of: {', '.join(STATISTICS)}")

    def describe(self) -> str:
        """The rule in one line, for reports."""
        ratio = f"{self.statistic} speedup"
        if not self.interval:
            return f"correct and {ratio} > p"
        return (
            f"correct and the low end of the 95 % interval of the {ratio} / (1 + noise floor "
            f"{self.floor:.1%}) > p; +N? = uncertain (the widened interval contains p), not fast"
        )


KBENCH_RULE = FastRule()
UPSTREAM_RULE = FastRule("mean", interval=False, floor=0.0)


@dataclass(frozen=True)
class Speedup:
    value: float
    low: float
    high: float


@dataclass(frozen=True)
class FastP:
    p: float
    against: str
    n: int
    fast: int
    uncertain: int
    untimed: int

    @property
    def rate(self) -> float:
        return self.fast / self.n if self.n else 0.0


@dataclass(frozen=True)
class GeoMean:
    """A geometric mean and the number of values (problems or verdicts) it covers."""

    value: float | None
    n: int


@dataclass(frozen=True)
class Record:
    """One verdict with the facts metrics group by."""

    problem_key: str
    verdict: Verdict
    model: str = ""
    sample: int = 0
    turn: int = 0
    level: int = 0
    tags: tuple[str, ...] = ()


def _time(stats: TimingStats, statistic: str) -> float:
    return stats.mean_ms if statistic == "mean" else stats.median_ms


def _usable(stats: TimingStats | None, statistic: str = "median") -> bool:
    return stats is not None and stats.meaningful and _time(stats, statistic) > 0


def speedup(verdict: Verdict, against: str = "eager", statistic: str = "median") -> Speedup | None:
    """Speedup over baseline `against` with its 95 % interval; None unless correct and timed."""
    base, cand = verdict.baseline(against), verdict.timing
    if not verdict.ok or base is None or cand is None:
        return None
    if not (_usable(base, statistic) and _usable(cand, statistic)):
        return None
    value = _time(base, statistic) / _time(cand, statistic)
    half = Z95 * math.hypot(max(base.rse, 0.0), max(cand.rse, 0.0))
    return Speedup(value, value * math.exp(-half), value * math.exp(half))


def speed_kind(verdict: Verdict, p: float, against: str = "eager", rule: FastRule = KBENCH_RULE) -> str:
    """'fast', 'uncertain', 'slow', 'untimed' or 'incorrect' at threshold p under `rule`."""
    if not verdict.ok:
        return "incorrect"
    s = speedup(verdict, against, rule.statistic)
    if s is None:
        return "untimed"
    if not rule.interval:
        return "fast" if s.value > p else "slow"
    low, high = s.low / (1 + rule.floor), s.high * (1 + rule.floor)
    if low > p:
        return "fast"
    return "uncertain" if low <= p < high else "slow"


def classify(verdict: Verdict, p: float, against: str = "eager", floor: float = NOISE_FLOOR) -> str:
    """`speed_kind` under kbench's rule with noise floor `floor`."""
    return speed_kind(verdict, p, against, FastRule(floor=floor))


def _fast_p(kinds: Sequence[str], p: float, against: str) -> FastP:
    return FastP(
        p, against, len(kinds), kinds.count("fast"), kinds.count("uncertain"), kinds.count("untimed")
    )


def fast_p(
    verdicts: Sequence[Verdict], p: float, against: str = "eager", rule: FastRule = KBENCH_RULE
) -> FastP:
    """Share of all verdicts (incorrect ones included) that are fast at p against `against`."""
    return _fast_p([speed_kind(v, p, against, rule) for v in verdicts], p, against)


def compiled(verdict: Verdict) -> bool:
    """Upstream KernelBench's `compiled`: the candidate built and loaded (whatever happened after)."""
    if verdict.status in NOT_COMPILED:
        return False
    return verdict.build is None or verdict.build.ok


def correctness_rate(verdicts: Sequence[Verdict]) -> float:
    return sum(v.ok for v in verdicts) / len(verdicts) if verdicts else 0.0


def geomean(values: Iterable[float]) -> GeoMean:
    logs = [math.log(x) for x in values]
    return GeoMean(math.exp(sum(logs) / len(logs)) if logs else None, len(logs))


def geomean_speedup(
    verdicts: Sequence[Verdict], against: str = "eager", only_fast: bool = False, rule: FastRule = KBENCH_RULE
) -> GeoMean:
    """Geometric-mean speedup over correct, timed verdicts; with only_fast, over those fast at p=1."""
    values = []
    for v in verdicts:
        s = speedup(v, against, rule.statistic)
        if s is not None and (not only_fast or speed_kind(v, 1.0, against, rule) == "fast"):
            values.append(s.value)
    return geomean(values)


def first_attempts(records: Iterable[Record]) -> dict[str, Verdict]:
    """Each problem's first attempt: sample 0, turn 0 (upstream KernelBench's one verdict per problem)."""
    return {r.problem_key: r.verdict for r in records if r.sample == 0 and r.turn == 0}


def by_problem(records: Iterable[Record]) -> dict[str, list[Verdict]]:
    """Every verdict of each problem, all samples and turns."""
    out: dict[str, list[Verdict]] = defaultdict(list)
    for r in records:
        out[r.problem_key].append(r.verdict)
    return out


def best_kind(
    verdicts: Sequence[Verdict], p: float, against: str = "eager", rule: FastRule = KBENCH_RULE
) -> str:
    """The best kind among a problem's verdicts at p ('missing' when it has none)."""
    kinds = [speed_kind(v, p, against, rule) for v in verdicts]
    return min(kinds, key=KINDS.index, default="missing")


def first_fast_p(
    records: Sequence[Record],
    problems: Sequence[str],
    p: float,
    against: str = "eager",
    rule: FastRule = KBENCH_RULE,
) -> FastP:
    """fast_p over problems from each one's first attempt; the denominator is len(problems)."""
    first = first_attempts(records)
    kinds = [speed_kind(first[k], p, against, rule) if k in first else "missing" for k in problems]
    return _fast_p(kinds, p, against)


def best_fast_p(
    records: Sequence[Record],
    problems: Sequence[str],
    p: float,
    against: str = "eager",
    rule: FastRule = KBENCH_RULE,
) -> FastP:
    """Best-of-k fast_p over problems: fast when any sample or turn is; the denominator is len(problems)."""
    every = by_problem(records)
    return _fast_p([best_kind(every.get(k, []), p, against, rule) for k in problems], p, against)


def best_speedups(
    records: Sequence[Record], against: str = "eager", statistic: str = "median"
) -> dict[str, float]:
    """Each problem's highest speedup over its correct, timed verdicts (problems without one are absent)."""
    out: dict[str, float] = {}
    for key, verdicts in by_problem(records).items():
        values = [s.value for s in (speedup(v, against, statistic) for v in verdicts) if s is not None]
        if values:
            out[key] = max(values)
    return out


def first_geomean(
    records: Sequence[Record], problems: Sequence[str], against: str = "eager", statistic: str = "median"
) -> GeoMean:
    """Geometric-mean speedup of the problems whose first attempt is correct and timed (n: how many)."""
    first = first_attempts(records)
    found = (speedup(first[k], against, statistic) for k in problems if k in first)
    return geomean(s.value for s in found if s is not None)


def best_geomean(
    records: Sequence[Record], problems: Sequence[str], against: str = "eager", statistic: str = "median"
) -> GeoMean:
    """Geometric mean of each problem's best speedup over its k attempts (n: problems with one)."""
    best = best_speedups(records, against, statistic)
    return geomean(best[k] for k in problems if k in best)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples of which c passed: 1 - C(n-c, k) / C(n, k)."""
    if not 0 <= c <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n, got n={n}, c={c}")
    if k < 1 or k > n:
        raise ValueError(f"pass@{k} is undefined with {n} samples (need 1 <= k <= n)")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


@dataclass(frozen=True)
class AtK:
    """Mean pass@k (or fast_p@k) over the problems with at least k samples; n: how many those are."""

    k: int
    value: float | None
    n: int


def at_k(counts: Mapping[str, tuple[int, int]], k: int) -> AtK:
    """Mean pass@k over problems {key: (n, c)}; problems with fewer than k samples are left out."""
    values = [pass_at_k(n, c, k) for n, c in counts.values() if n >= k]
    return AtK(k, sum(values) / len(values) if values else None, len(values))


def sample_counts(
    records: Iterable[Record], passed: Callable[[Verdict], bool] = lambda v: v.ok
) -> dict[str, tuple[int, int]]:
    """{problem: (samples, passing samples)} for pass@k; one sample is its best turn."""
    best: dict[tuple[str, str, int], bool] = defaultdict(bool)
    for r in records:
        key = (r.problem_key, r.model, r.sample)
        best[key] = best[key] or passed(r.verdict)
    out: dict[str, tuple[int, int]] = {}
    for (problem, _, _), ok in best.items():
        n, c = out.get(problem, (0, 0))
        out[problem] = (n + 1, c + int(ok))
    return out


def fast_p_at_k(
    records: Iterable[Record], k: int, p: float, against: str = "eager", rule: FastRule = KBENCH_RULE
) -> AtK:
    """fast_p@k: pass@k where a sample passes when one of its turns is fast at p under `rule`."""
    return at_k(sample_counts(records, lambda v: speed_kind(v, p, against, rule) == "fast"), k)


def sol_fraction(verdict: Verdict) -> float | None:
    """Speed-of-light time / measured time: 1.0 is the roofline; above 1 is impossible and flagged."""
    if not verdict.ok or verdict.sol_ms is None or not _usable(verdict.timing) or verdict.sol_ms <= 0:
        return None
    assert verdict.timing is not None
    return verdict.sol_ms / verdict.timing.median_ms


@dataclass(frozen=True)
class Mean:
    """An arithmetic mean and the number of values it covers (None with none)."""

    value: float | None
    n: int


def mean_sol_fraction(verdicts: Sequence[Verdict]) -> Mean:
    values = [f for f in map(sol_fraction, verdicts) if f is not None]  # the verdicts that have one
    return Mean(sum(values) / len(values) if values else None, len(values))


def breakdown(
    records: Iterable[Record],
    by: Callable[[Record], Iterable[str]],
    metric: Callable[[list[Verdict]], T],
) -> dict[str, T]:
    """metric() per group, groups in sorted order; a record may sit in several groups (tags)."""
    groups: dict[str, list[Verdict]] = defaultdict(list)
    for r in records:
        for g in by(r):
            groups[g].append(r.verdict)
    return {g: metric(groups[g]) for g in sorted(groups)}


def by_level(r: Record) -> list[str]:
    return [f"level {r.level}"]


def by_tag(r: Record) -> list[str]:
    return list(r.tags) or ["(untagged)"]


def by_model(r: Record) -> list[str]:
    return [r.model or "(none)"]


def by_turn(r: Record) -> list[str]:
    return [f"turn {r.turn}"]


GENERALIZES: dict[str, Callable[[Verdict], bool]] = {
    "yes": lambda v: v.generalizes is True,
    "no": lambda v: v.generalizes is False,
    "unchecked": lambda v: v.generalizes is None,
}


def filter_generalizes(records: Iterable[Record], which: str) -> list[Record]:
    """The records whose verdict's hidden-shape result is `which` (a key of GENERALIZES)."""
    keep = GENERALIZES.get(which)
    if keep is None:
        raise ConfigError(f"unknown generalizes filter {which!r}; use one of: {', '.join(GENERALIZES)}")
    return [r for r in records if keep(r.verdict)]


def generalization(verdicts: Sequence[Verdict]) -> tuple[int, int]:
    """(verdicts checked at hidden sizes, those correct there): a rate of checked/generalizing."""
    checked = [v for v in verdicts if v.generalizes is not None]
    return len(checked), sum(bool(v.generalizes) for v in checked)
