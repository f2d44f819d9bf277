"""The comparison of a candidate's outputs against the reference (host side).

The comparison runs in the host process, where the two tensors lie (CPU copies, or on a GPU the host's
own buffers: evaluate/device_outputs.py), with float64 the judge: |out - ref| <= tol * (floor + |ref|),
with NaN and inf required at the same positions with the same sign.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kbench.types import AllcloseTolerance, Correctness

if TYPE_CHECKING:  # imported where used: the CLI starts the warm starter before the host imports torch
    import torch

REPORT_POSITIONS = 5  # differing positions listed in a mismatch report


@dataclass(frozen=True)
class Comparison:
    """One output compared with the reference; `rule` names a structural mismatch, else ''."""

    passed: bool
    rule: str = ""
    max_abs: float = 0.0
    mean_abs: float = 0.0
    max_rel: float = 0.0
    report: str = ""
    needed_tol: float = 0.0  # max |out-ref| / (min(1, rms(ref))+|ref|): the smallest passing tolerance


def _structure(out: torch.Tensor, ref: torch.Tensor) -> Comparison | None:
    if tuple(out.shape) != tuple(ref.shape):
        return Comparison(
            False, "output-shape", report=f"shape {tuple(out.shape)}, expected {tuple(ref.shape)}"
        )
    if out.dtype != ref.dtype:
        return Comparison(False, "output-dtype", report=f"dtype {out.dtype}, expected {ref.dtype}")
    return None


COMPARE_CHUNK = 1 << 22  # elements compared per step: bounded scratch memory, however big the output
_FP32_MARGIN = 1 - 1e-6  # covers fp32 rounding of |out-ref| and of the threshold (a few ulps)


def output_scale(ref: torch.Tensor) -> float:
    """Root mean square of a reference output's finite values (0.0 for none), `COMPARE_CHUNK` at a time."""
    import torch

    flat = ref.detach().reshape(-1)
    total, count = 0.0, 0
    for start in range(0, flat.numel(), COMPARE_CHUNK):
        chunk = flat[start : start + COMPARE_CHUNK]
        chunk = chunk.float() if chunk.is_floating_point() else chunk.double()
        norm = float(torch.linalg.vector_norm(chunk))
        if norm != norm or norm == float("inf"):  # NaN/inf in the chunk: the finite values only
            chunk = chunk[torch.isfinite(chunk)]
            norm = float(torch.linalg.vector_norm(chunk.double()))
        total += norm * norm
        count += chunk.numel()
    return (total / count) ** 0.5 if count else 0.0


def compare(out: torch.Tensor, ref: torch.Tensor, tol: float, scale: float | None = None) -> Comparison:
    """Elementwise |out-ref| <= tol*(floor+|ref|), NaN/inf-aware, with the first differing positions.

    floor = min(1, rms(ref)) (`scale`: the rms of the whole output when `ref` is a sample of it). The
    absolute term is the error an honest kernel makes where the output nears zero; with 1 in its place (as
    in allclose(atol=rtol)) an output whose values are all below the tolerance passes as zeros, and one of
    magnitude 0.01 passes the reference computed in fp16 at tol 1e-4 (its error ~5e-4 x 0.01). Relative to
    the output's own magnitude, the rule judges an output and the same output scaled down alike; for
    outputs of rms >= 1 it is unchanged.

    `COMPARE_CHUNK` elements at a time. A chunk of fp32/fp16/bf16 outputs is first checked in fp32 with a
    margin below the threshold; only a chunk with an element that fails or falls within the margin (or a
    NaN/inf) is judged in float64, so the verdict is the float64 one. On a 2-core host a 256 MiB output
    took 10 s whole-tensor in float64 (a dozen full-size temporaries), 1.2 s this way.
    """
    import torch

    bad = _structure(out, ref)
    if bad is not None:
        return bad
    floor = min(1.0, output_scale(ref) if scale is None else scale)
    if isinstance(tol, AllcloseTolerance):  # upstream KernelBench's protocol: torch.allclose's tol * 1
        floor = 1.0
    o_all, r_all = out.detach().reshape(-1), ref.detach().reshape(-1)
    fast = out.dtype in (torch.float32, torch.float16, torch.bfloat16)
    n = o_all.numel()
    acc = _Acc(floor=floor)
    # three chunk-sized buffers for the whole comparison: a fresh 16 MiB tensor per step cost more in page
    # faults than its arithmetic (a subtraction into a new tensor 3.7x slower than into a reused one)
    where = o_all.device  # the CPU, or the GPU both lie on
    scratch = torch.empty(3, min(n, COMPARE_CHUNK), device=where) if fast and n else None
    for start in range(0, n, COMPARE_CHUNK):
        o, r = o_all[start : start + COMPARE_CHUNK], r_all[start : start + COMPARE_CHUNK]
        o32, r32 = o.to(where, torch.float32), r.to(where, torch.float32)
        if not (scratch is not None and _fp32_chunk(o32, r32, tol, acc, scratch[:, : o.numel()])):
            _fp64_chunk(o.to(where, torch.float64), r.to(where, torch.float64), tol, start, acc)
    mean_abs = acc.finite_sum / acc.finite_n if acc.finite_n else 0.0
    if not acc.wrong_n:
        return Comparison(True, "", acc.max_abs, mean_abs, acc.max_rel, needed_tol=acc.needed)
    report = _report(out, o_all, r_all, acc, tol)
    return Comparison(False, "", acc.max_abs, mean_abs, acc.max_rel, report, acc.needed)


NEEDED_CHUNK = 1 << 26  # elements per step of needed_tol: bounded scratch memory (2 GiB at float64 x 4)


def needed_tol(out: torch.Tensor, ref: torch.Tensor) -> float:
    """max |out-ref| / (min(1, rms(ref)) + |ref|) computed where the tensors live, in float64: the smallest
    tolerance `compare` would pass `out` at (inf where NaN/inf do not match), without moving anything to
    the host. A measurement (problems/trivial.py screens with it), not a verdict: `compare` gives those."""
    import torch

    if out.shape != ref.shape:
        return float("inf")
    floor = min(1.0, output_scale(ref))
    o_all, r_all = out.detach().reshape(-1), ref.detach().reshape(-1)
    worst = 0.0
    for start in range(0, o_all.numel(), NEEDED_CHUNK):
        o = o_all[start : start + NEEDED_CHUNK].double()
        r = r_all[start : start + NEEDED_CHUNK].double()
        same = (torch.isnan(o) & torch.isnan(r)) | ((o == r) & torch.isinf(r))
        diff = torch.where(same, 0.0, (o - r).abs()).nan_to_num(nan=float("inf"), posinf=float("inf"))
        bound = floor + r.abs().nan_to_num(posinf=0.0, neginf=0.0)
        scaled = torch.where(diff == 0, 0.0, diff / bound)
        worst = max(worst, float(scaled.max()))
    return worst


@dataclass
class _Acc:
    max_abs: float = 0.0
    max_rel: float = 0.0
    finite_sum: float = 0.0
    finite_n: int = 0
    wrong_n: int = 0
    floor: float = 1.0  # the absolute term's scale: min(1, rms of the reference output)
    needed: float = 0.0  # max |o-r| / (floor+|r|) so far (inf where NaN/inf do not match)
    first: list[int] = field(default_factory=list)  # flat indices of the first differing elements


def _fp32_chunk(o: torch.Tensor, r: torch.Tensor, tol: float, acc: _Acc, scratch: torch.Tensor) -> bool:
    """Account a chunk whose every element passes with room to spare in fp32; False: judge it in float64.
    `scratch`: three rows of the chunk's length."""
    import torch

    # |o-r| <= tol*(floor+|r|) as max(|o-r| / (floor+|r|)) <= tol, the margin covering the division's
    # rounding too: seven passes over the chunk (twelve before, 1.7-2x slower on a 2-core host). A floor of
    # 0 (an all-zero reference) makes 0/0 = NaN, which sends the chunk to float64.
    diff, rabs, scaled = scratch[0], scratch[1], scratch[2]
    torch.sub(o, r, out=diff).abs_()
    torch.abs(r, out=rabs)
    torch.add(rabs, acc.floor, out=scaled)
    worst = torch.div(diff, scaled, out=scaled).max()
    if not bool(worst <= tol * _FP32_MARGIN):  # NaN compares False
        return False
    acc.needed = max(acc.needed, float(worst))
    acc.max_abs = max(acc.max_abs, float(diff.max()))
    acc.finite_sum += float(diff.sum())  # fp32 partial sums of one chunk, added up in float64
    acc.finite_n += diff.numel()
    acc.max_rel = max(acc.max_rel, float(torch.div(diff, rabs.clamp_min_(1e-12), out=rabs).max()))
    return True


def _fp64_chunk(o: torch.Tensor, r: torch.Tensor, tol: float, start: int, acc: _Acc) -> None:
    import torch

    both_nan = torch.isnan(o) & torch.isnan(r)
    same_inf = torch.isinf(o) & torch.isinf(r) & (torch.sign(o) == torch.sign(r))
    special = both_nan | same_inf
    diff = (o - r).abs()
    diff = torch.where(special, torch.zeros_like(diff), diff)
    diff = torch.where(torch.isnan(diff), torch.full_like(diff, float("inf")), diff)
    bound = acc.floor + r.abs().nan_to_num(posinf=0.0, neginf=0.0)
    ok = diff <= tol * bound
    ok |= special
    scaled = torch.where(diff == 0, torch.zeros_like(diff), diff / bound)
    acc.needed = max(acc.needed, float(scaled.max()) if scaled.numel() else 0.0)
    finite = diff[torch.isfinite(diff)]
    acc.max_abs = max(acc.max_abs, float(diff.max()))
    acc.finite_sum += float(finite.sum())
    acc.finite_n += finite.numel()
    acc.max_rel = max(acc.max_rel, float((diff / r.abs().clamp_min(1e-12)).max()))
    if not bool(ok.all()):
        wrong = (~ok).nonzero().reshape(-1)
        acc.wrong_n += wrong.numel()
        acc.first += (wrong[: REPORT_POSITIONS - len(acc.first)] + start).tolist()


def _report(out: torch.Tensor, o: torch.Tensor, r: torch.Tensor, acc: _Acc, tol: float) -> str:
    # the floor stays out of the first line: for a secret seed that line is all a report shows (summarize_correctness)
    term = "1" if isinstance(tol, AllcloseTolerance) else "min(1, rms(ref))"
    rule = f"tol={tol:g}: |out-ref| <= tol*({term}+|ref|)"
    lines = [f"{acc.wrong_n} of {o.numel()} elements differ beyond {rule}; first positions:"]
    for flat in acc.first:
        pos = _unravel(flat, tuple(out.shape))
        lines.append(f"  at {pos}: got {float(o[flat]):.6g}, expected {float(r[flat]):.6g}")
    return "\n".join(lines)


def _unravel(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    pos = []
    for size in reversed(shape):
        flat, i = divmod(flat, size)
        pos.append(i)
    return tuple(reversed(pos))


def seed_label(seed: int, secret: Collection[int] = ()) -> str:
    """How a report names a seed: a secret one by neither number nor anything else that identifies it."""
    return "a secret seed" if seed in secret else f"seed {seed}"


def summarize_correctness(results: list[tuple[int, Comparison]], secret: Collection[int] = ()) -> Correctness:
    """Fold per-(seed, output) comparisons into one Correctness; the first failure's report wins.

    A failure on a secret seed is reported without its seed, positions and values: the report reaches
    the model as refinement feedback, and the evaluations of one run share their secret seeds
    (reference_pool), so the number would let a later turn make the secret inputs itself."""
    seeds = tuple(dict.fromkeys(seed for seed, _ in results))
    failed = [(s, c) for s, c in results if not c.passed]
    report = ""
    if failed:
        seed, comp = failed[0]
        text = (
            comp.report.splitlines()[0].removesuffix("; first positions:") if seed in secret else comp.report
        )
        report = f"{seed_label(seed, secret)}: {text}"
    return Correctness(
        passed=not failed,
        seeds=seeds,
        max_abs_err=max((c.max_abs for _, c in results), default=0.0),
        mean_abs_err=max((c.mean_abs for _, c in results), default=0.0),
        max_rel_err=max((c.max_rel for _, c in results), default=0.0),
        report=report,
        seeds_passed=len(seeds) - len({seed for seed, _ in failed}),
    )
