"""Every timed call's fingerprint, held consistent per input set: honest noise agrees, any odd call does not."""

from __future__ import annotations

import torch

from kbench.worker.consistency import Consistency


def _loop(outputs_for: object, calls: int = 300, sets: int = 3) -> Consistency:
    check = Consistency()
    for call in range(calls):
        k = call % sets
        check.add(call, k, outputs_for(call, k))  # type: ignore[operator]
    return check


BASE = [torch.randn(64, 97, generator=torch.Generator().manual_seed(k)) for k in range(3)]


def test_honest_calls_agree_even_when_not_bitwise_deterministic() -> None:
    noise = torch.Generator().manual_seed(7)
    check = _loop(lambda call, k: [BASE[k] * (1 + 1e-7 * torch.randn(BASE[k].shape, generator=noise))])
    assert check.check() is None


def test_one_stale_call_in_three_hundred_is_caught() -> None:
    check = _loop(lambda call, k: [BASE[(k + 1) % 3] if call == 211 else BASE[k]])
    found = check.check()
    assert found is not None and "timed call 211" in found and "input set 1" in found


def test_a_permutation_of_the_right_values_is_caught() -> None:
    """Same sum and norm, other positions: the strided subsample at a random offset sees it."""
    caught = 0
    flipped = BASE[0].flip(1)
    for _ in range(20):  # each Consistency draws its own offset
        check = _loop(lambda call, k: [flipped if call == 30 else BASE[k]])
        caught += check.check() is not None
    assert caught >= 19


def test_integer_and_nan_outputs() -> None:
    idx = torch.arange(50)
    nan = torch.tensor([1.0, float("nan")])
    assert _loop(lambda call, k: [idx, nan]).check() is None
    assert _loop(lambda call, k: [idx + (call == 100), nan]).check() is not None


BIG = [torch.randn(1 << 19, generator=torch.Generator().manual_seed(10 + k)) for k in range(3)]


def test_large_outputs_are_fingerprinted_at_gathered_positions() -> None:
    """Above POSITIONS elements a call is fingerprinted where it is read: honest calls agree, a stale one
    (another set's output) and one with garbage in 1 % of its elements do not."""
    from kbench.worker.consistency import POSITIONS

    assert BIG[0].numel() > POSITIONS
    assert _loop(lambda call, k: [BIG[k].clone()]).check() is None
    stale = _loop(lambda call, k: [BIG[(k + 1) % 3] if call == 97 else BIG[k]]).check()
    assert stale is not None and "timed call 97" in stale
    spoiled = BIG[1].clone()
    spoiled[::100] = 1e3  # garbage on 1 % of the elements, right everywhere else
    partial = _loop(lambda call, k: [spoiled if call == 154 else BIG[k]]).check()
    assert partial is not None and "timed call 154" in partial


def test_gathered_positions_differ_between_loops() -> None:
    """Drawn from the OS's entropy per loop: a candidate cannot know which elements are fingerprinted."""
    first, second = Consistency(), Consistency()
    first.add(0, 0, [BIG[0]])
    second.add(0, 0, [BIG[0]])
    assert not torch.equal(first.positions[0], second.positions[0])


def test_a_call_returning_other_shapes_is_inconsistent_not_a_crash() -> None:
    """Another number of outputs, or another size, than the loop's first call: named, not an exception."""
    fewer = _loop(lambda call, k: [] if call == 40 else [BIG[k]]).check()
    assert fewer is not None and "timed call 40" in fewer
    shorter = _loop(lambda call, k: [BIG[k][:1000] if call == 41 else BIG[k]]).check()
    assert shorter is not None and "timed call 41" in shorter
