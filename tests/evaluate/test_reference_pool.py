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
    return Plan(device="cpu", fixed=[1000], secret=[secret], timing=[secret + 1])


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
    copy = pickle.loads(pickle.dumps(pool))
    assert copy.max_bytes == 123 and len(copy) == 0


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
