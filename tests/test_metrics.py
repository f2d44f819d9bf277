"""Metrics against hand-computed values, including the edge cases (no correct sample, ties at p, k > n)."""

from __future__ import annotations

import math

import pytest

from kbench import metrics as m
from kbench.types import Status, TimingStats, Verdict


def stats(ms: float, rse: float = 0.0, meaningful: bool = True) -> TimingStats:
    return TimingStats(ms, ms, 0.0, 0.0, ms, 100, rse, meaningful=meaningful)


def verdict(
    cand: float = 1.0,
    eager: float | None = 1.0,
    compile_ms: float | None = None,
    rse: tuple[float, float] = (0.0, 0.0),
    status: Status = Status.OK,
    sol: float | None = None,
    meaningful: bool = True,
) -> Verdict:
    base = []
    if eager is not None:
        base.append(("eager", stats(eager, rse[0])))
    if compile_ms is not None:
        base.append(("compile", stats(compile_ms, rse[0])))
    return Verdict(
        status=status,
        problem_key="kbench:2/1",
        backend="cuda",
        preset="full",
        dtype="fp32",
        device="cuda",
        timing=stats(cand, rse[1], meaningful),
        baselines=tuple(base),
        sol_ms=sol,
    )


# A: 2.0x exact; B: exactly 1.0x, no noise; C: 1.25x with 5 % rse on each side; D: mismatch; E: no baseline.
A = verdict(cand=0.5, eager=1.0)
B = verdict(cand=1.0, eager=1.0)
C = verdict(cand=0.8, eager=1.0, rse=(0.05, 0.05))
D = verdict(status=Status.MISMATCH)
E = verdict(eager=None)
RUN = [A, B, C, D, E]


def test_speedup_interval_is_hand_computed() -> None:
    s = m.speedup(verdict(cand=1.0, eager=2.0, rse=(0.01, 0.01)))
    assert s is not None
    # half-width in log space: 1.96 * sqrt(0.01^2 + 0.01^2) = 0.0277186
    assert s.value == 2.0
    assert s.low == pytest.approx(2.0 * math.exp(-0.0277186), rel=1e-6)
    assert s.high == pytest.approx(2.0 * math.exp(0.0277186), rel=1e-6)
    assert s.low == pytest.approx(1.94532, rel=1e-5)


def test_speedup_is_none_when_incorrect_untimed_or_meaningless() -> None:
    assert m.speedup(D) is None
    assert m.speedup(E) is None
    assert m.speedup(verdict(meaningful=False)) is None
    assert m.speedup(A, "compile") is None


@pytest.mark.parametrize(
    ("p", "floor", "fast", "uncertain"),
    [
        (0.0, 0.0, 3, 0),  # A, B, C; E is correct but untimed, D incorrect
        (1.0, 0.0, 2, 0),  # B is exactly 1.0 with no noise and no floor: '>' makes the tie not fast
        (1.2, 0.0, 1, 1),  # C: 1.25x, 95 % interval [1.088, 1.436] straddles 1.2
        (2.0, 0.0, 0, 0),  # A is exactly 2.0
        (1.0, 0.01, 2, 1),  # the 1 % floor: B's 1.0x is within [0.990, 1.010] of 1, uncertain
        (2.0, 0.01, 0, 1),  # A's 2.0x is within [1.980, 2.020] of 2
        (1.9, 0.01, 1, 0),  # A: 2.0 / 1.01 = 1.980 > 1.9
    ],
)
def test_fast_p_hand_computed(p: float, floor: float, fast: int, uncertain: int) -> None:
    r = m.fast_p(RUN, p, rule=m.FastRule(floor=floor))
    assert (r.n, r.fast, r.uncertain, r.untimed) == (5, fast, uncertain, 1)
    assert r.rate == fast / 5


def test_tie_at_p_with_noise_is_uncertain() -> None:
    v = verdict(cand=1.0, eager=1.0, rse=(0.01, 0.0))
    assert m.classify(v, 1.0) == "uncertain"
    assert m.classify(v, 0.9) == "fast"
    assert m.classify(v, 1.1) == "slow"


def test_a_tight_speedup_within_the_noise_floor_is_never_fast() -> None:
    """1.001x with a 0.01 % interval (a candidate that runs the reference and then a copy): not fast_1."""
    v = verdict(cand=1.0, eager=1.001, rse=(0.0001, 0.0001))
    s = m.speedup(v)
    assert s is not None and s.low > 1.0  # the interval alone would call it fast
    assert m.classify(v, 1.0) == "uncertain" and m.fast_p([v], 1.0).fast == 0
    assert m.classify(v, 1.0, floor=0.0) == "fast"  # what the rule without a floor said
    assert m.classify(verdict(cand=1.0, eager=1.02), 1.0) == "fast"  # 1.02 / 1.01 > 1
    assert m.classify(verdict(cand=1.0, eager=0.98), 1.0) == "slow"  # 0.98 * 1.01 < 1
    assert m.geomean_speedup([v], only_fast=True) == m.GeoMean(None, 0)


def test_fast_p_against_compile() -> None:
    v = verdict(cand=1.0, eager=3.0, compile_ms=0.5)
    assert m.fast_p([v], 1.0, "eager").fast == 1
    assert m.fast_p([v], 1.0, "compile").fast == 0


def test_geomean_speedups() -> None:
    every, fast = m.geomean_speedup(RUN), m.geomean_speedup(RUN, only_fast=True)
    assert (every.value, every.n) == (pytest.approx(2.5 ** (1 / 3)), 3)  # 2.0 * 1.0 * 1.25
    assert (fast.value, fast.n) == (pytest.approx(math.sqrt(2.5)), 2)  # A and C


def test_no_correct_samples() -> None:
    bad = [D, verdict(status=Status.BUILD_ERROR)]
    assert m.correctness_rate(bad) == 0.0
    assert m.fast_p(bad, 0.0).rate == 0.0
    assert m.geomean_speedup(bad) == m.GeoMean(None, 0)
    assert m.mean_sol_fraction(bad) == m.Mean(None, 0)
    assert m.fast_p([], 1.0).rate == 0.0
    assert m.correctness_rate([]) == 0.0


def test_correctness_rate() -> None:
    assert m.correctness_rate(RUN) == 4 / 5


@pytest.mark.parametrize(
    ("n", "c", "k", "want"),
    [(5, 2, 1, 0.4), (5, 2, 2, 1 - 3 / 10), (5, 2, 4, 1.0), (5, 0, 3, 0.0), (10, 3, 5, 1 - 21 / 252)],
)
def test_pass_at_k(n: int, c: int, k: int, want: float) -> None:
    assert m.pass_at_k(n, c, k) == pytest.approx(want)


def test_pass_at_k_rejects_k_above_n() -> None:
    with pytest.raises(ValueError, match="undefined"):
        m.pass_at_k(2, 1, 3)
    # problems with fewer samples than k are left out of the mean, not counted as failures
    mixed = m.at_k({"a": (2, 1), "b": (5, 2)}, 3)
    assert (mixed.value, mixed.n) == (pytest.approx(1 - 1 / 10), 1)
    assert m.at_k({"a": (2, 1)}, 3) == m.AtK(3, None, 0)


def test_sample_counts_take_the_best_turn() -> None:
    recs = [
        m.Record("p1", D, sample=0, turn=0),
        m.Record("p1", A, sample=0, turn=1),
        m.Record("p1", D, sample=1, turn=0),
        m.Record("p2", D, sample=0, turn=0),
    ]
    assert m.sample_counts(recs) == {"p1": (2, 1), "p2": (1, 0)}


def test_sol_fraction() -> None:
    assert m.sol_fraction(verdict(cand=0.5, sol=0.25)) == 0.5
    assert m.sol_fraction(verdict(cand=0.5)) is None
    assert m.sol_fraction(verdict(status=Status.MISMATCH, sol=0.25)) is None
    # (0.25 / 0.5 + 0.1 / 1.0) / 2 over the 2 verdicts with a speed-of-light time; the third has none
    found = m.mean_sol_fraction([verdict(cand=0.5, sol=0.25), verdict(cand=1.0, sol=0.1), verdict(cand=0.5)])
    assert (found.value, found.n) == (pytest.approx(0.3), 2)


def test_breakdowns() -> None:
    recs = [
        m.Record("p1", A, model="x", level=1, tags=("gemm", "act"), turn=0),
        m.Record("p2", D, model="y", level=2, tags=("gemm",), turn=1),
        m.Record("p3", B, model="x", level=2, tags=(), turn=1),
    ]
    assert m.breakdown(recs, m.by_tag, len) == {"(untagged)": 1, "act": 1, "gemm": 2}
    assert m.breakdown(recs, m.by_level, m.correctness_rate) == {"level 1": 1.0, "level 2": 0.5}
    assert m.breakdown(recs, m.by_model, lambda vs: m.fast_p(vs, 1.0).fast) == {"x": 1, "y": 0}
    assert list(m.breakdown(recs, m.by_turn, len).items()) == [("turn 0", 1), ("turn 1", 2)]


# Three problems, two samples, two turns: p1 is fast only in sample 1 turn 1, p2 correct but slow first
# and fast later, p3 never correct; p4 was selected but has no verdict (its requests failed).
FAST, SLOW = verdict(cand=0.5, eager=1.0), verdict(cand=2.0, eager=1.0)
GRID = [
    m.Record("p1", D, sample=0, turn=0),
    m.Record("p1", D, sample=0, turn=1),
    m.Record("p1", D, sample=1, turn=0),
    m.Record("p1", FAST, sample=1, turn=1),
    m.Record("p2", SLOW, sample=0, turn=0),
    m.Record("p2", FAST, sample=0, turn=1),
    m.Record("p2", SLOW, sample=1, turn=0),
    m.Record("p2", SLOW, sample=1, turn=1),
    m.Record("p3", D, sample=0, turn=0),
    m.Record("p3", D, sample=1, turn=0),
]
SELECTED = ["p1", "p2", "p3", "p4"]


def test_first_attempt_fast_p_divides_by_the_selected_problems() -> None:
    first = m.first_fast_p(GRID, SELECTED, 1.0)
    assert (first.n, first.fast) == (4, 0)  # p2's first attempt is correct but slow
    assert m.first_fast_p(GRID, SELECTED, 0.0).fast == 1  # only p2's first attempt is correct
    assert set(m.first_attempts(GRID)) == {"p1", "p2", "p3"}


def test_best_of_k_takes_each_problems_best_attempt() -> None:
    best = m.best_fast_p(GRID, SELECTED, 1.0)
    assert (best.n, best.fast, best.uncertain) == (4, 2, 0)  # p1 and p2; p3 never correct, p4 missing
    assert m.best_kind([], 1.0) == "missing" and m.best_kind([D, SLOW], 1.0) == "slow"
    assert m.best_speedups(GRID) == {"p1": 2.0, "p2": 2.0}
    pooled = m.fast_p([r.verdict for r in GRID], 1.0)
    assert (pooled.n, pooled.fast) == (10, 2)  # pooling counts attempts, not problems


def test_pass_at_k_over_samples_of_the_grid() -> None:
    counts = m.sample_counts(GRID)  # a sample passes when any of its turns is correct
    assert counts == {"p1": (2, 1), "p2": (2, 2), "p3": (2, 0)}
    assert m.at_k(counts, 1).value == pytest.approx((0.5 + 1.0 + 0.0) / 3)
    assert m.at_k(counts, 2).value == pytest.approx((1.0 + 1.0 + 0.0) / 3)
    assert m.at_k(counts, 2).n == 3 and m.at_k({"a": (1, 1)}, 2).n == 0


def _x(speedup: float | None, status: Status = Status.OK) -> Verdict:
    """A verdict `speedup` times faster than eager, both timed with a 0.05 % relative error."""
    if speedup is None:
        return verdict(status=status)
    return verdict(cand=1.0, eager=speedup, rse=(0.0005, 0.0005))


def test_the_readme_worked_example() -> None:
    """The numbers docs/metrics.md quotes for its worked example."""
    recs = [
        m.Record("A", _x(0.98), sample=0, turn=0),
        m.Record("A", _x(1.30), sample=0, turn=1),
        m.Record("A", _x(1.004), sample=1, turn=0),
        m.Record("A", _x(1.25), sample=1, turn=1),
        m.Record("B", _x(None, Status.MISMATCH), sample=0, turn=0),
        m.Record("B", _x(None, Status.BUILD_ERROR), sample=0, turn=1),
        m.Record("B", _x(0.90), sample=1, turn=0),
        m.Record("B", _x(0.95), sample=1, turn=1),
        m.Record("C", _x(2.10), sample=1, turn=0),  # sample 0's request failed: no verdict
        m.Record("C", _x(None, Status.NO_CODE), sample=1, turn=1),
    ]
    problems = ["A", "B", "C"]
    assert [m.first_fast_p(recs, problems, p).fast for p in (0.0, 1.0)] == [1, 0]
    assert [m.best_fast_p(recs, problems, p).fast for p in (0.0, 1.0, 2.0)] == [3, 2, 1]
    assert m.geomean(m.best_speedups(recs).values()).value == pytest.approx(1.37, abs=0.005)
    correct = m.sample_counts(recs)
    assert m.at_k(correct, 1).value == pytest.approx(0.8333, abs=1e-4)
    assert m.at_k(correct, 2) == m.AtK(2, 1.0, 2)
    assert m.fast_p_at_k(recs, 1, 1.0).value == pytest.approx(2 / 3)
    assert m.fast_p_at_k(recs, 2, 1.0) == m.AtK(2, 0.5, 2)
    pooled = m.fast_p([r.verdict for r in recs], 1.0)
    assert (pooled.n, sum(r.verdict.ok for r in recs), pooled.fast, pooled.uncertain) == (10, 7, 3, 1)


def test_generalization_counts_and_filters_on_the_hidden_shape_result() -> None:
    from dataclasses import replace

    yes, no, unchecked = (replace(verdict(), generalizes=g) for g in (True, False, None))
    failed = verdict(status=Status.MISMATCH)
    records = [m.Record("kbench:2/1", v) for v in (yes, no, no, unchecked, failed)]
    assert m.generalization([r.verdict for r in records]) == (3, 1)
    assert [r.verdict for r in m.filter_generalizes(records, "yes")] == [yes]
    assert len(m.filter_generalizes(records, "no")) == 2
    assert [r.verdict for r in m.filter_generalizes(records, "unchecked")] == [unchecked, failed]
    with pytest.raises(m.ConfigError, match="yes, no, unchecked"):
        m.filter_generalizes(records, "maybe")


def test_pass_and_fast_p_at_k_between_1_and_n() -> None:
    """One problem, four samples: 2 correct (1 of them fast at 1). By hand, pass@2 = 1 - C(2,2)/C(4,2)
    = 1 - 1/6 = 0.8333; pass@3 = 1 - 0 = 1; fast_1@2 = 1 - C(3,2)/C(4,2) = 1 - 3/6 = 0.5; fast_1@3 =
    1 - C(3,3)/C(4,3) = 0.75."""
    recs = [m.Record("p", v, sample=i) for i, v in enumerate([FAST, SLOW, D, D])]
    counts = m.sample_counts(recs)
    assert m.at_k(counts, 2).value == pytest.approx(5 / 6) and m.at_k(counts, 3).value == 1.0
    assert m.fast_p_at_k(recs, 2, 1.0).value == pytest.approx(0.5)
    assert m.fast_p_at_k(recs, 3, 1.0) == m.AtK(3, pytest.approx(0.75), 1)
    assert m.fast_p_at_k(recs, 5, 1.0) == m.AtK(5, None, 0)  # k > n: no problem to average over


def test_per_problem_geomeans_say_how_many_problems_they_cover() -> None:
    """GRID's first attempts: only p2's is correct (0.5x); best of k: p1 2.0x, p2 2.0x; p3 and p4 none."""
    assert m.first_geomean(GRID, SELECTED) == m.GeoMean(0.5, 1)
    assert m.best_geomean(GRID, SELECTED) == m.GeoMean(2.0, 2)
    assert m.first_geomean(GRID, ["p3", "p4"]) == m.GeoMean(None, 0)


def test_upstream_rule_over_the_grid() -> None:
    """Upstream's fast_p is `speedup > p` on mean times: exactly 2.0x is not fast at 2, 1.9 is."""
    up = m.UPSTREAM_RULE
    assert m.best_fast_p(GRID, SELECTED, 1.9, rule=up).fast == 2
    assert m.best_fast_p(GRID, SELECTED, 2.0, rule=up).fast == 0
    assert m.first_fast_p(GRID, SELECTED, 0.0, rule=up).fast == 1  # p2's 0.5x is > 0
    near = verdict(cand=1.0, eager=1.001, rse=(0.0001, 0.0001))
    assert m.speed_kind(near, 1.0, rule=up) == "fast" and m.classify(near, 1.0) == "uncertain"


def test_compiled_is_upstreams_notion() -> None:
    from kbench.types import BuildResult

    assert [m.compiled(verdict(status=s)) for s in (Status.OK, Status.MISMATCH, Status.RUNTIME_ERROR)] == [
        True,
        True,
        True,
    ]
    assert not any(
        m.compiled(verdict(status=s))
        for s in (Status.NO_CODE, Status.STATIC_REJECT, Status.BUILD_ERROR, Status.LOAD_ERROR)
    )
    from dataclasses import replace

    timed_out_building = replace(verdict(status=Status.TIMEOUT), build=BuildResult(False, "cuda"))
    assert not m.compiled(timed_out_building)
    with pytest.raises(m.ConfigError, match="median, mean"):
        m.FastRule("mode")
