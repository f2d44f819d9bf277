"""Stored baselines are reused by evaluation only for the same hardware, torch, device and timing settings."""

from __future__ import annotations

from dataclasses import asdict, replace
from pathlib import Path

import pytest
import torch
from evalfixtures import cpu_config, fixture_source

from kbench.config import RunConfig, resolve
from kbench.evaluate.flow import evaluate
from kbench.evaluate.plan import make_plan, timing_settings
from kbench.evaluate.reference_run import get_reference
from kbench.hardware import fingerprint
from kbench.problems import get_problem
from kbench.store import Store, reuse
from kbench.types import Candidate, Status, TimingStats

PROBLEM = "kbench:2/1"
# A median no CPU run of this small problem measures (~0.04 ms): seeing it in a verdict means it was reused.
PLANTED_MS = 123.0


def planted(cfg: RunConfig, **settings: object) -> TimingStats:
    """A baseline as `kbench baseline` stores it, recorded with cfg's CPU timing settings (or overrides)."""
    recorded = asdict(timing_settings(cfg, "cpu")) | settings
    stats = TimingStats(PLANTED_MS, PLANTED_MS, 0.5, 0.4, 122.0, 40, 0.002, "cpu", "perf_counter")
    return reuse.annotate(stats, source=reuse.MEASURED, timing_settings=reuse.settings_text(recorded))


def without_provenance(stats: TimingStats) -> TimingStats:
    """`stats` less where they came from (their recorded timing settings kept)."""
    return reuse.annotate(stats, source="", stored_at="")


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "k.db")


def put(store: Store, cfg: RunConfig, stats: TimingStats, fp: str = "", torch_version: str = "") -> None:
    where = (fp or fingerprint(), torch_version or torch.__version__)
    store.put_baseline(PROBLEM, cfg.preset, cfg.dtype, "eager", *where, stats)


def test_lookup_matches_fingerprint_and_torch_version(store: Store, tmp_path: Path) -> None:
    cfg = cpu_config(tmp_path)
    put(store, cfg, planted(cfg), fp="another-gpu")
    put(store, cfg, planted(cfg), torch_version="2.0.0")
    assert reuse.baselines_for(store, PROBLEM, cfg) == {}
    put(store, cfg, planted(cfg))
    found = reuse.baselines_for(store, PROBLEM, cfg)
    assert set(found) == {"eager"} and reuse.source_of(found["eager"]) == reuse.STORED
    assert found["eager"].provenance is not None and found["eager"].provenance.stored_at
    assert without_provenance(found["eager"]) == without_provenance(planted(cfg))


def test_switch_and_measure_off_disable_lookup(store: Store, tmp_path: Path) -> None:
    cfg = cpu_config(tmp_path)
    put(store, cfg, planted(cfg))
    assert resolve(environ={"KBENCH_REUSE_BASELINES": "0"}).reuse_baselines is False
    assert reuse.baselines_for(store, PROBLEM, cfg.model_copy(update={"reuse_baselines": False})) == {}
    assert reuse.baselines_for(store, PROBLEM, cfg.model_copy(update={"measure": False})) == {}


def test_reusable_needs_same_settings_device_and_mode(tmp_path: Path) -> None:
    cfg = cpu_config(tmp_path)
    settings = asdict(timing_settings(cfg, "cpu"))
    good = planted(cfg)
    assert reuse.reusable({"eager": good}, ["eager"], settings, "cpu") == {"eager": good}
    assert reuse.reusable({"eager": good}, ["compile"], settings, "cpu") == {}
    assert reuse.reusable({"eager": good}, ["eager"], settings | {"budget_s": 5.0}, "cpu") == {}
    assert reuse.reusable({"eager": replace(good, device="cuda")}, ["eager"], settings, "cpu") == {}
    upstream = TimingStats(1.0, 1.0, 0.0, 0.0, 1.0, 100, 0.0, "cpu", "upstream")  # no settings recorded
    assert reuse.reusable({"eager": upstream}, ["eager"], settings, "cpu") == {}
    gpu = replace(good, device="cuda")
    gpu_settings = asdict(timing_settings(cfg, "cuda:1"))
    gpu = reuse.annotate(gpu, timing_settings=reuse.settings_text(gpu_settings))
    assert reuse.reusable({"eager": gpu}, ["eager"], gpu_settings, "cuda:1") == {"eager": gpu}


def test_reference_job_skips_reused_modes_and_cache_key_tells_them_apart(tmp_path: Path) -> None:
    problem = get_problem(PROBLEM)
    cfg = cpu_config(tmp_path, timing_budget_s=0.2)
    skipped = get_reference(problem, cfg, make_plan(cfg, "cpu"), tmp_path / "a", skip={"eager"})
    assert skipped.timings == {} and skipped.outputs  # outputs computed, nothing timed
    full = get_reference(problem, cfg, make_plan(cfg, "cpu"), tmp_path / "b")
    assert not full.cache_hit and full.timings["eager"].n > 1


def test_evaluation_reuses_a_matching_stored_baseline(store: Store, tmp_path: Path) -> None:
    problem = get_problem(PROBLEM)
    cfg = cpu_config(tmp_path, backend="triton", timing_budget_s=0.2)
    put(store, cfg, planted(cfg))
    candidate = Candidate(problem.key, "triton", fixture_source("triton_honest.py"))
    v = evaluate(problem, candidate, cfg, reuse.baselines_for(store, PROBLEM, cfg))
    assert v.status is Status.OK, v.message + v.log_tail
    eager = v.baseline("eager")
    assert eager is not None and reuse.source_of(eager) == reuse.STORED
    assert without_provenance(eager) == without_provenance(planted(cfg))
    assert v.timing is not None and v.timing.n > 1  # the candidate is still timed
    assert v.speedup("eager") == pytest.approx(PLANTED_MS / v.timing.median_ms)


def test_evaluation_retimes_a_baseline_taken_with_other_settings(store: Store, tmp_path: Path) -> None:
    problem = get_problem(PROBLEM)
    cfg = cpu_config(tmp_path, timing_budget_s=0.2)
    put(store, cfg, planted(cfg, budget_s=0.1))
    # A candidate that fails at its first call: the reference job (and its timing) runs before it.
    candidate = Candidate(problem.key, "cpp", fixture_source("py_raise.py"))
    v = evaluate(problem, candidate, cfg, reuse.baselines_for(store, PROBLEM, cfg))
    assert v.status is Status.RUNTIME_ERROR
    eager = v.baseline("eager")
    assert eager is not None and reuse.source_of(eager) in (reuse.MEASURED, reuse.CACHED)
    assert eager.median_ms < PLANTED_MS / 10
    assert eager.provenance is not None
    recorded = eager.provenance.timing_settings
    assert recorded == reuse.settings_text(asdict(timing_settings(cfg, "cpu")))
