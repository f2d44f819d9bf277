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
    ("p", "fast", "uncertain"),
    [
        (0.0, 3, 0),  # A, B, C; E is correct but untimed, D incorrect
        (1.0, 2, 0),  # B is exactly 1.0 with no noise: '>' makes the tie not fast, and not uncertain
        (1.2, 1, 1),  # C: 1.25x, 95 % interval [1.088, 1.436] straddles 1.2
        (2.0, 0, 0),  # A is exactly 2.0
    ],
)
def test_fast_p_hand_computed(p: float, fast: int, uncertain: int) -> None:
    r = m.fast_p(RUN, p)
    assert (r.n, r.fast, r.uncertain, r.untimed) == (5, fast, uncertain, 1)
    assert r.rate == fast / 5


def test_tie_at_p_with_noise_is_uncertain() -> None:
    v = verdict(cand=1.0, eager=1.0, rse=(0.01, 0.0))
    assert m.classify(v, 1.0) == "uncertain"
    assert m.classify(v, 0.9) == "fast"
    assert m.classify(v, 1.1) == "slow"


def test_fast_p_against_compile() -> None:
    v = verdict(cand=1.0, eager=3.0, compile_ms=0.5)
    assert m.fast_p([v], 1.0, "eager").fast == 1
    assert m.fast_p([v], 1.0, "compile").fast == 0


def test_geomean_speedups() -> None:
    assert m.geomean_speedup(RUN) == pytest.approx(2.5 ** (1 / 3))  # 2.0 * 1.0 * 1.25
    assert m.geomean_speedup(RUN, only_fast=True) == pytest.approx(math.sqrt(2.5))  # A and C


def test_no_correct_samples() -> None:
    bad = [D, verdict(status=Status.BUILD_ERROR)]
    assert m.correctness_rate(bad) == 0.0
    assert m.fast_p(bad, 0.0).rate == 0.0
    assert m.geomean_speedup(bad) is None
    assert m.mean_sol_fraction(bad) is None
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
    assert m.mean_pass_at_k({"a": (2, 1), "b": (5, 2)}, 3) == pytest.approx(1 - 1 / 10)
    assert m.mean_pass_at_k({"a": (2, 1)}, 3) is None


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
    assert m.mean_sol_fraction([verdict(cand=0.5, sol=0.25), verdict(cand=1.0, sol=0.1)]) == pytest.approx(
        0.3
    )


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
