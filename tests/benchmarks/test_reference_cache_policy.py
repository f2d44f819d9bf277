"""benchmarks/reference_cache_policy.py: output sizes from the meta device, and the cache's own functions
replaying a run's passes under each policy."""

from __future__ import annotations

import random
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import reference_cache_policy as bench  # noqa: E402

from kbench.evaluate.reference_cache import MIN_SIZE  # noqa: E402
from kbench.problems import get_problem  # noqa: E402


def test_output_bytes_come_from_the_meta_device_at_the_preset() -> None:
    relu = get_problem("kbench:1/29")  # one fp32 output of batch_size x dim
    assert bench.output_bytes(relu, "full") == 8192 * 65536 * 4
    assert bench.output_bytes(relu, "small") == 16 * 257 * 4


def test_passes_in_turn_hit_the_small_entries_with_credits_and_nothing_by_recency(tmp_path: Path) -> None:
    """Six problems in turn, room for the three small ones and one large: kbench's credits keep the small
    ones for every later pass; least-recently-used removes each entry before its problem comes back."""
    small, large = MIN_SIZE // 2, 4 * MIN_SIZE
    entries = [(f"kbench:2/{i}", small if i % 2 else large) for i in range(1, 7)]
    limit = (3 * small + large + MIN_SIZE) / 1e9
    with bench.policy("greedy-dual-size"):
        credits = bench.simulate(entries, limit, 3, None, tmp_path)
    with bench.policy("lru"):
        recency = bench.simulate(entries, limit, 3, None, tmp_path)
    assert credits[0] == recency[0] == 0
    assert credits[1:] == [3, 3] and recency[1:] == [0, 0]
    with bench.policy("greedy-dual-size"):
        shuffled = bench.simulate(entries, limit, 3, random.Random(0), tmp_path)
    assert all(hit >= 3 for hit in shuffled[1:])
    assert list(tmp_path.iterdir()) == []  # each cache removed after its run
