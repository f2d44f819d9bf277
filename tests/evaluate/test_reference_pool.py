"""The per-run reference pool: one reference run per key, waiters share it, bounded memory."""

from __future__ import annotations

import pickle
import threading
import time

import pytest
import torch

from kbench.config import RunConfig
from kbench.evaluate.plan import Plan
from kbench.evaluate.reference_cache import ReferenceData
from kbench.evaluate.reference_pool import DEFAULT_MAX_BYTES, ReferencePool, pool_key
from kbench.problems import get_problem


def _data(nbytes: int = 400) -> ReferenceData:
    return ReferenceData(outputs={1: [torch.zeros(nbytes // 4)]}, phases={"outputs": 1.0})


def _plan(secret: int) -> Plan:
    return Plan(device="cpu", fixed=[1000], secret=[secret])


def test_one_run_per_key_and_later_calls_get_its_plan() -> None:
    pool = ReferencePool()
    calls = []

    def run(secret: int):  # type: ignore[no-untyped-def]
        calls.append(secret)
        return _plan(secret), _data()

    plan, data, shared = pool.get("a", lambda: run(7))
    again, data2, shared2 = pool.get("a", lambda: run(8))
    other, _, _ = pool.get("b", lambda: run(9))
    assert calls == [7, 9] and (shared, shared2) == (False, True)
    assert again.secret == plan.secret == [7] and other.secret == [9]
    assert data2.shared and data2.phases == {} and data2.outputs is data.outputs
    assert (pool.runs, pool.reuses) == (2, 1)


def test_concurrent_calls_wait_for_the_first_run() -> None:
    pool = ReferencePool()
    started = []

    def run():  # type: ignore[no-untyped-def]
        started.append(1)
        time.sleep(0.3)
        return _plan(1), _data()

    results = []
    threads = [threading.Thread(target=lambda: results.append(pool.get("k", run))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(started) == 1 and sorted(r[2] for r in results) == [False, True, True, True]


def test_failed_run_is_not_kept() -> None:
    pool = ReferencePool()

    def boom():  # type: ignore[no-untyped-def]
        raise RuntimeError("reference failed")

    with pytest.raises(RuntimeError):
        pool.get("k", boom)
    _, _, shared = pool.get("k", lambda: (_plan(2), _data()))
    assert not shared and len(pool) == 1


def test_memory_bound_evicts_least_recently_used() -> None:
    pool = ReferencePool(max_bytes=1000)
    pool.get("a", lambda: (_plan(1), _data(400)))
    pool.get("b", lambda: (_plan(2), _data(400)))
    pool.get("a", lambda: (_plan(3), _data(400)))  # a is now the most recent
    pool.get("c", lambda: (_plan(4), _data(400)))  # over 1000 bytes: b goes
    assert pool.held_bytes() == 800
    _, _, shared_b = pool.get("b", lambda: (_plan(5), _data(400)))
    assert not shared_b
    big_plan, _, _ = pool.get("big", lambda: (_plan(6), _data(4000)))  # larger than the bound: not kept
    assert big_plan.secret == [6] and "big" not in pool._entries


MIB = 1 << 20


def test_a_full_pool_keeps_the_most_entries_for_its_bytes() -> None:
    """A batch that visits its problems in turn, their outputs more than the pool holds: least-recently-used
    alone evicted every entry before its next use; spending the bytes on the small ones keeps them reused."""
    pool = ReferencePool(max_bytes=10 * MIB)
    sizes = {"s1": MIB, "s2": MIB, "b1": 6 * MIB, "b2": 6 * MIB}
    for _ in range(3):
        for key, size in sizes.items():
            pool.get(key, lambda size=size: (_plan(1), _data(size)))
    assert pool.reuses == 4 and pool.runs == 8  # both small ones reused twice, the large ones run each time
    assert pool.held_bytes() <= 10 * MIB and {"s1", "s2"} <= set(pool._entries)


def test_an_entry_not_used_for_long_ages_out_whatever_its_size() -> None:
    pool = ReferencePool(max_bytes=10 * MIB)
    pool.get("small", lambda: (_plan(1), _data(MIB)))
    gone_after = None
    for i in range(20):  # large entries, each used once, each evicting the one before
        pool.get(f"big{i}", lambda: (_plan(2), _data(6 * MIB)))
        if "small" not in pool._entries:
            gone_after = i
            break
    assert gone_after is not None and gone_after >= 3  # it outlived several larger ones, not all of them


def test_expected_evaluations_let_an_entry_go_after_the_last_and_say_when_to_share() -> None:
    pool = ReferencePool()
    pool.expect(["a", "a", "b", "c"])
    assert pool.begin("b") is False  # b's only evaluation: nothing to share it with
    assert pool.begin("a") is True  # another of a comes
    pool.get("ka", lambda: (_plan(1), _data()), group="a")
    assert pool.begin("a") is True  # the last, but the pool holds a's reference
    pool.end("a")
    assert "ka" in pool._entries  # one evaluation of a is still running
    pool.end("a")
    assert "ka" not in pool._entries
    seen = []

    def run():  # type: ignore[no-untyped-def]
        seen.append(pool.begin("c"))  # c's last evaluation starts while its reference runs for the pool
        return _plan(2), _data()

    pool.get("kc", run, group="c")
    assert seen == [True]
    assert pool.begin("unknown") is True  # not expected: shared, as without `expect`
    pool.end("unknown")
    pool.end("b")


def test_default_bound_follows_available_memory(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A quarter of the host's available memory, never below the old fixed 8 GiB."""
    from kbench.evaluate import reference_pool

    monkeypatch.setattr(reference_pool, "mem_available", lambda: 256 << 30)
    assert ReferencePool().max_bytes == 64 << 30
    monkeypatch.setattr(reference_pool, "mem_available", lambda: 0)  # no /proc/meminfo
    assert ReferencePool().max_bytes == DEFAULT_MAX_BYTES == 8 << 30


def test_pickles_empty() -> None:
    pool = ReferencePool(max_bytes=123)
    pool.get("a", lambda: (_plan(1), _data()))
    pool.expect(["a", "b", "b"])
    copy = pickle.loads(pickle.dumps(pool))
    assert copy.max_bytes == 123 and len(copy) == 0
    assert copy.begin("a") is False and copy.begin("b") is True  # what is expected travels


def test_key_follows_reference_settings_not_candidate_ones(tmp_path) -> None:  # type: ignore[no-untyped-def]
    problem = get_problem("kbench:2/1")
    cfg = RunConfig(cache_dir=tmp_path, preset="small")
    key = pool_key(problem, cfg, "cpu", ())
    candidate_side = cfg.model_copy(update={"backend": "triton", "timeout_s": 5.0, "static_checks": False})
    assert pool_key(problem, candidate_side, "cpu", ()) == key
    assert pool_key(problem, cfg.model_copy(update={"preset": "full"}), "cpu", ()) != key
    assert pool_key(problem, cfg.model_copy(update={"dtype": "fp16"}), "cpu", ()) != key
    assert pool_key(problem, cfg, "cuda:0", ()) != key
    assert pool_key(problem, cfg, "cpu", ("eager",)) != key
    assert pool_key(get_problem("kbench:2/2"), cfg, "cpu", ()) != key
