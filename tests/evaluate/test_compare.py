"""The host's comparison of outputs against the reference (problems/compare.py)."""

from __future__ import annotations

import pytest
import torch

from kbench.problems.compare import compare, summarize_correctness


@pytest.mark.parametrize("shape", [(6, 42, 5), (1,), (7, 3)])
def test_within_tolerance_passes(shape: tuple[int, ...]) -> None:
    gen = torch.Generator().manual_seed(1)
    ref = (torch.rand(shape, generator=gen) + 1) * torch.randn(shape, generator=gen).sign()  # |ref| in [1, 2)
    assert compare(ref + 5e-5, ref, 1e-4).passed
    assert not compare(ref + 5e-4, ref, 1e-4).passed  # beyond 1e-4 * (1 + 2)


def test_the_absolute_term_follows_a_small_outputs_magnitude() -> None:
    """Outputs of rms < 1 are judged as if scaled to rms 1: all-zeros does not pass an output whose values
    are all below the tolerance, nor does the fp16 rounding of an output of magnitude 0.01."""
    gen = torch.Generator().manual_seed(2)
    big = torch.randn(1000, generator=gen, dtype=torch.float64).float()
    for scale in (1.0, 1e-2, 1e-5):
        ref = big * scale
        assert compare(ref * (1 + 2e-5), ref, 1e-4).passed, scale  # relative 2e-5: passes at any scale
        assert not compare(torch.zeros_like(ref), ref, 1e-4).passed, scale
        assert not compare(ref.half().float(), ref, 1e-4).passed, scale  # fp16 rounding: ~5e-4 relative
    tiny = big * 1e-5
    assert compare(torch.zeros_like(tiny), tiny, 1e-4, scale=1.0).passed  # the old rule: atol = tol
    assert compare(torch.zeros(3), torch.zeros(3), 1e-4).passed  # an all-zero reference: exact zeros pass
    assert not compare(torch.full((3,), 1e-30), torch.zeros(3), 1e-4).passed


def test_a_sample_is_judged_with_the_whole_outputs_scale() -> None:
    ref = torch.cat([torch.full((10,), 1e-3), torch.full((990,), 10.0)])
    sample, whole_scale = ref[:10], float(ref.pow(2).mean().sqrt())
    off = sample + 5e-5  # 5e-5 <= 1e-4 * (1 + 1e-3), the whole output's floor being 1
    assert compare(off, sample, 1e-4, scale=whole_scale).passed
    assert not compare(off, sample, 1e-4).passed  # the sample alone has rms 1e-3


def test_needed_tol_is_the_smallest_passing_tolerance() -> None:
    gen = torch.Generator().manual_seed(3)
    ref = torch.randn(500, generator=gen) * 4
    out = ref + torch.randn(500, generator=gen) * 1e-3
    need = compare(out, ref, 1.0).needed_tol
    assert compare(out, ref, need * 1.001).passed and not compare(out, ref, need * 0.999).passed
    assert compare(out, ref, 1e-9).needed_tol == pytest.approx(need, rel=1e-6)  # judged in float64 too


def test_relative_tolerance_scales_with_magnitude() -> None:
    ref = torch.full((4,), 1000.0)
    assert compare(ref + 0.05, ref, 1e-4).passed  # 1e-4 + 1e-4 * 1000 = 0.1001
    assert not compare(ref + 0.2, ref, 1e-4).passed


def test_mismatch_report_names_first_positions() -> None:
    ref = torch.zeros(3, 4)
    out = ref.clone()
    out[1, 2] = 1.0
    out[2, 0] = -2.0
    c = compare(out, ref, 1e-4)
    assert not c.passed and c.max_abs == 2.0
    assert "2 of 12 elements" in c.report and "(1, 2)" in c.report and "(2, 0)" in c.report


def test_nan_and_inf_must_match_positions() -> None:
    ref = torch.tensor([float("nan"), float("inf"), 1.0])
    assert compare(ref.clone(), ref, 1e-4).passed
    assert not compare(torch.tensor([0.0, float("inf"), 1.0]), ref, 1e-4).passed
    assert not compare(torch.tensor([float("nan"), float("-inf"), 1.0]), ref, 1e-4).passed
    assert not compare(torch.tensor([float("nan"), float("inf"), float("nan")]), ref, 1e-4).passed


def test_structure_rules() -> None:
    ref = torch.zeros(2, 3)
    assert compare(torch.zeros(3, 2), ref, 1e-4).rule == "output-shape"
    assert compare(torch.zeros(2, 3, dtype=torch.float16), ref, 1e-4).rule == "output-dtype"


def test_summarize_keeps_first_failure() -> None:
    ok = compare(torch.zeros(2), torch.zeros(2), 1e-4)
    bad = compare(torch.ones(2), torch.zeros(2), 1e-4)
    s = summarize_correctness([(1, ok), (2, bad), (3, ok)])
    assert not s.passed and s.seeds == (1, 2, 3) and s.report.startswith("seed 2:")
    assert s.seeds_passed == 2  # a seed passes only when every output of it does
    assert summarize_correctness([(1, ok), (1, bad), (2, ok)]).seeds_passed == 1


def test_a_failure_on_a_secret_seed_names_neither_seed_nor_values() -> None:
    from kbench.problems.compare import summarize_correctness

    ref = torch.zeros(3, 4)
    out = ref.clone()
    out[1, 2] = 7.0
    good, bad = compare(ref, ref, 1e-4), compare(out, ref, 1e-4)
    secret = 8123456789
    hidden = summarize_correctness([(1000, good), (secret, bad)], secret=[secret])
    assert not hidden.passed and "secret seed" in hidden.report and "1 of 12 elements" in hidden.report
    assert str(secret) not in hidden.report and "7" not in hidden.report and "(1, 2)" not in hidden.report
    public = summarize_correctness(
        [(1000, bad)], secret=[secret]
    )  # a fixed seed's report keeps positions and values
    assert "seed 1000" in public.report and "(1, 2)" in public.report and "got 7" in public.report


def test_chunked_comparison_reports_what_the_whole_tensor_shows(monkeypatch: pytest.MonkeyPatch) -> None:
    import kbench.problems.compare as correctness

    ref = torch.randn(4, 5, 6)
    out = ref.clone()
    out[0, 0, 0] = ref[0, 0, 0] + 1.0  # first chunk
    out[3, 4, 2] = float("nan")  # last chunk
    out[2, 1, 1] = ref[2, 1, 1] + 1e-9  # within tolerance
    ref[1, 2, 3] = out[1, 2, 3] = float("inf")  # matching inf
    monkeypatch.setattr(correctness, "COMPARE_CHUNK", 7)  # 120 elements: 18 chunks
    c = correctness.compare(out, ref, 1e-4)
    assert not c.passed and c.max_abs == float("inf")
    assert c.report.splitlines()[0].startswith("2 of 120 elements differ")
    assert "at (0, 0, 0)" in c.report and "at (3, 4, 2): got nan" in c.report
    ok = correctness.compare(ref.clone(), ref, 1e-4)
    assert ok.passed and ok.max_abs == 0.0 and ok.mean_abs == 0.0
    near = ref.clone()
    near[0, 1, 2] += 1e-6
    close = correctness.compare(near, ref, 1e-4)
    assert close.passed and close.max_abs == pytest.approx(1e-6, rel=0.1)
    assert close.mean_abs == pytest.approx(close.max_abs / 119, rel=0.1)  # the inf pair is not finite


def test_fp32_first_pass_never_changes_the_float64_verdict() -> None:
    """Elements just inside and just outside the threshold (within fp32 rounding of it) are judged as the
    float64 rule judges them: the fp32 pass only accepts chunks with room to spare."""
    from kbench.problems.compare import compare

    gen = torch.Generator().manual_seed(3)
    tol = 1e-4
    for factor in (1 - 1e-7, 1 + 1e-7, 1 - 3e-6, 1 + 3e-6, 0.5, 2.0):
        ref = torch.randn(4096, generator=gen, dtype=torch.float64) * 10
        out64 = ref.clone()
        out64[1234] = ref[1234] + factor * tol * (1 + ref[1234].abs())
        out, ref32 = out64.float(), ref.float()
        exact = bool(((out.double() - ref32.double()).abs() <= tol + tol * ref32.double().abs()).all())
        assert compare(out, ref32, tol).passed == exact, factor
