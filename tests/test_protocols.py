"""Protocols: upstream KernelBench's tolerance, trials and fast_p rule beside kbench's, by hand."""

from __future__ import annotations

import typing

import pytest
import torch

from kbench import metrics as m
from kbench.config import RunConfig, resolve
from kbench.errors import ConfigError
from kbench.problems.compare import compare
from kbench.protocols import PROTOCOLS, get_protocol, parse_protocols
from kbench.types import AllcloseTolerance, Problem, Status, TimingStats, Verdict

KBENCH, UPSTREAM = PROTOCOLS["kbench"], PROTOCOLS["kernelbench"]


def test_allclose_tolerance_keeps_the_absolute_term_of_torch_allclose() -> None:
    """A small output (rms 0.002) off by 0.005 everywhere: kbench's rule scales the absolute term to the
    output, 1e-2 * (0.002 + 0.002) = 4e-5 < 0.005, and fails it; allclose(atol=rtol=1e-2) allows
    1e-2 * (1 + 0.002) = 0.01002 > 0.005, and passes it, as upstream does."""
    ref = torch.full((64,), 0.002)
    out = ref + 0.005
    assert not compare(out, ref, 1e-2).passed
    assert compare(out, ref, AllcloseTolerance(1e-2)).passed
    assert torch.allclose(ref, out, atol=1e-2, rtol=1e-2)  # what upstream's check says
    # 0.011 is beyond 1e-2 * (1 + 0.002) under both rules; the report names the allclose rule
    failed = compare(ref + 0.011, ref, AllcloseTolerance(1e-2))
    assert not failed.passed and "tol=0.01: |out-ref| <= tol*(1+|ref|)" in failed.report


def test_allclose_tolerance_is_relative_above_one() -> None:
    ref = torch.full((8, 8), 100.0)
    assert compare(ref * 1.0099, ref, AllcloseTolerance(1e-2)).passed  # 0.99 <= 1e-2 * 101 = 1.01
    assert not compare(ref * 1.0102, ref, AllcloseTolerance(1e-2)).passed  # 1.02 > 1.01


def test_kernelbench_protocol_sets_every_dtype_to_allclose_1e_2() -> None:
    p = Problem("kbench", 1, 1, "X", "", tolerance=(("fp32", 1e-5),))
    judged = UPSTREAM.problem(p)
    for dtype in ("fp32", "fp16", "bf16"):
        tol = judged.tol(dtype)
        assert isinstance(tol, AllcloseTolerance) and tol == 1e-2
    assert KBENCH.problem(p) is p and p.tol("fp32") == 1e-5 and p.tol("fp16") == 1e-2
    assert judged.key == p.key and judged.code_hash == p.code_hash


def test_the_protocol_sets_the_trials_unless_the_config_does() -> None:
    cfg = resolve(flags={"protocol": "kernelbench"})
    assert UPSTREAM.configure(cfg).seeds == 5 and KBENCH.configure(cfg).seeds == 3
    assert UPSTREAM.configure(resolve(flags={"seeds": 2})).seeds == 2
    assert "allclose(atol=rtol=0.01), 5 seeds + 1 secret seed" in UPSTREAM.correctness("fp32", 5)
    assert "fp32 tol 0.0001" in KBENCH.correctness("fp32", 3)


def test_unknown_protocols_name_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="kbench, kernelbench"):
        get_protocol("upstream")
    with pytest.raises(ConfigError, match="bad config value for 'protocol'"):
        resolve(flags={"protocol": "upstream"})
    assert [p.name for p in parse_protocols("kernelbench, kbench,kernelbench")] == ["kernelbench", "kbench"]
    # the configuration accepts exactly the registry's names (config.py cannot import the registry:
    # workers import config, and protocols uses the host's metrics)
    assert set(typing.get_args(RunConfig.model_fields["protocol"].annotation)) == set(PROTOCOLS)


def _stats(median: float, mean: float, rse: float = 0.0) -> TimingStats:
    return TimingStats(median, mean, 0.0, 0.0, median, 100, rse)


def _verdict(cand: TimingStats, eager: TimingStats) -> Verdict:
    return Verdict(
        Status.OK, "kbench:1/1", "cuda", "full", "fp32", "cuda", timing=cand, baselines=(("eager", eager),)
    )


def test_upstreams_rule_divides_means_and_compares_raw() -> None:
    """Eager median 1.0 / mean 1.2 ms, candidate median 0.99 / mean 1.0 ms with 2 % rse on each side:
    median speedup 1.0101 (interval [0.956, 1.067] / 1.01: uncertain at p=1 under kbench's rule), mean
    speedup 1.2 (fast at 1 and not at 1.2 under upstream's: `>`)."""
    v = _verdict(_stats(0.99, 1.0, 0.02), _stats(1.0, 1.2, 0.02))
    kb, up = KBENCH.fast_rule(0.01), UPSTREAM.fast_rule(0.01)
    med, mean = m.speedup(v), m.speedup(v, statistic="mean")
    assert med is not None and mean is not None
    assert med.value == pytest.approx(1 / 0.99) and mean.value == pytest.approx(1.2)
    assert m.speed_kind(v, 1.0, rule=kb) == "uncertain"
    assert m.speed_kind(v, 1.0, rule=up) == "fast"
    assert m.speed_kind(v, 1.19, rule=up) == "fast" and m.speed_kind(v, 1.2, rule=up) == "slow"
    assert up == m.UPSTREAM_RULE and kb.floor == 0.01 and UPSTREAM.fast_rule(0.05).floor == 0.0
    assert "mean speedup > p" in up.describe() and "noise floor 1.0%" in kb.describe()
