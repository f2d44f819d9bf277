"""The host's judgements on a timing (evaluate/judge.py): the batch-together rule."""

from __future__ import annotations

import pytest

from kbench.evaluate.judge import TOGETHER_MARGIN_MS, TOGETHER_RATIO, WorkerOutcome, check_batching
from kbench.sandbox.protocol import WorkerResult
from kbench.types import LoopFacts, Status, TimingStats


def _stats(
    per_call_ms: float, alone_ms: float | None, device: str = "cuda", meaningful: bool = True
) -> TimingStats:
    loop = LoopFacts(batch=64, single_call_ms=alone_ms, single_calls=0 if alone_ms is None else 8)
    return TimingStats(per_call_ms, per_call_ms, 0.0, 0.0, per_call_ms, 10, 0.0, device=device,
                       meaningful=meaningful, loop=loop)  # fmt: skip


def _ok(per_call_ms: float, alone_ms: float | None, **kw: object) -> WorkerOutcome:
    return WorkerOutcome(Status.OK, result=WorkerResult(timing=_stats(per_call_ms, alone_ms, **kw)))  # type: ignore[arg-type]


# An H100's eager 4x256 GELU: 0.155 ms more for a call alone than per call in batches
# (benchmarks/results/h100/batch-together.md, as the numbers below)
EAGER = _stats(0.123, 0.278)


def test_calls_run_together_are_caught() -> None:
    # one launch over a batch's calls, written straight into its outputs: 5 us per call in batches, while
    # a call alone still costs its launch and the round trip
    judged = check_batching(_ok(0.005, 0.290), EAGER, "cuda")
    assert (judged.status, judged.rule) == (Status.CHEAT, "batch-together")
    assert "0.29 ms" in judged.message and "0.005 ms per call in batches" in judged.message


@pytest.mark.parametrize(("per_call", "alone"), [(0.0498, 0.2773), (0.0637, 0.3470), (0.0424, 0.2946)])
def test_what_an_h100_measured_passes(per_call: float, alone: float) -> None:
    # its honest Triton twin (at 2.5 and 3.0 of the rule's statistic), and the attack whose outputs are
    # copied one by one into their slots (3.3): it gains 1.2-1.5x, under the limit (docs/anti-cheat.md)
    assert check_batching(_ok(per_call, alone), EAGER, "cuda").status is Status.OK


@pytest.mark.parametrize(
    ("per_call", "alone"),
    [
        (0.020, 0.030),  # launch-bound: back to back, each launch hides the last kernel
        (0.010, 0.020 + 0.155),  # a call alone twice its time in batches, plus the reference's excess
        (0.500, 0.510),  # kernel-bound
        (0.002, 0.002 * TOGETHER_RATIO + TOGETHER_MARGIN_MS + 0.155 - 1e-6),  # at the limit: not over it
    ],
)
def test_honest_overlap_and_the_reference_excess_pass(per_call: float, alone: float) -> None:
    judged = check_batching(_ok(per_call, alone), EAGER, "cuda")
    assert judged.status is Status.OK and not judged.warnings


def test_the_reference_excess_is_what_a_cold_call_alone_costs_anyone() -> None:
    # a call alone costs the reference 0.2 ms beyond its time per call (a cold cache, the referee's per-batch
    # costs): the candidate's call alone is judged less that much
    slow_alone = _stats(0.100, 0.300)
    limit = 0.200 + TOGETHER_RATIO * 0.010 + TOGETHER_MARGIN_MS
    assert check_batching(_ok(0.010, limit - 0.001), slow_alone, "cuda").status is Status.OK
    assert check_batching(_ok(0.010, limit + 0.001), slow_alone, "cuda").rule == "batch-together"


def test_off_where_it_cannot_judge() -> None:
    for outcome, reference, device in [
        (_ok(0.005, 0.290, device="cpu"), EAGER, "cpu"),  # the CPU: a batch's fixed costs are too noisy
        (_ok(0.005, 0.290, meaningful=False), EAGER, "cuda"),  # Triton's interpreter
        (_ok(0.001, None), EAGER, "cuda"),  # batches of one call
    ]:
        assert check_batching(outcome, reference, device).status is Status.OK
    off = check_batching(_ok(0.005, 0.290), _stats(0.04, None), "cuda")
    assert off.status is Status.OK
    assert off.warnings == ["batch-together rule off: the reference's call alone is not on record"]
