"""Seeded inputs, checksums, and the comparison of outputs against the reference.

Inputs are generated on the evaluation device under `torch.manual_seed(seed)` (factory calls in
`get_inputs` run inside a `torch.device` context; the reference and the candidate worker run the same
code on the same device, so they get bit-identical inputs), then cast to the problem dtype. On a GPU this
takes milliseconds where the CPU's generator took seconds for the `full` presets' largest inputs.
Checksums of CPU tensors are SHA-256 over their bytes; those of GPU tensors are a position-weighted
digest computed on the device (a permutation or a write changes it), so nothing large crosses to the
host. The comparison runs on the host, on CPU copies, in float64: |out - ref| <= tol + tol * |ref|, with
NaN and inf required at the same positions with the same sign.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from kbench.types import Correctness

TORCH_DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
REPORT_POSITIONS = 5  # differing positions listed in a mismatch report


def ieee_numerics() -> None:
    """Compute float32 as float32 in both workers, before any snapshot or candidate import.

    torch's defaults let cuDNN convolutions use TF32 (`cudnn.allow_tf32 = True`), about 1e-3 relative
    error: an honest fp32 kernel then "mismatches" the reference (seen on an H200: 19 % of a conv2d's
    outputs beyond 1e-4), and a TF32 kernel looks correct. The reference is the fp32 result, so TF32 is off
    everywhere; a candidate that turns it back on trips the `global-state` rule. Changing this changes
    reference outputs: bump reference.NUMERICS so cached ones are not reused.
    """
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")


def generate_inputs(get_inputs: Any, seed: int, device: torch.device | str) -> list[Any]:
    """`get_inputs()` under `seed`, its factory calls made on `device` (as returned: not moved or cast).
    Changing where inputs are made changes their values: bump reference.NUMERICS with it."""
    device = torch.device(device)
    torch.manual_seed(seed)
    if device.type == "cpu":
        return list(get_inputs())
    with torch.device(device):
        return list(get_inputs())


def make_inputs(get_inputs: Any, seed: int, device: torch.device, dtype: str) -> list[Any]:
    """`get_inputs()` under `seed`, generated on `device` (CPU-made tensors are moved), cast to `dtype`."""
    return [_place(x, device, dtype) for x in generate_inputs(get_inputs, seed, device)]


def _place(x: Any, device: torch.device, dtype: str) -> Any:
    if not isinstance(x, torch.Tensor):
        return x
    x = x.to(device)
    return x.to(TORCH_DTYPES[dtype]) if x.is_floating_point() else x


def checksum(values: Sequence[Any]) -> list[str]:
    """A SHA-256 prefix per input of its bytes (CPU tensors), device digest (GPU tensors) or repr."""
    out = []
    for x in values:
        h = hashlib.sha256()
        if isinstance(x, torch.Tensor):
            t = x.detach()
            h.update(f"{t.dtype}{tuple(t.shape)}{t.device.type}".encode())
            if t.device.type == "cpu":
                h.update(t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
            else:
                h.update(device_digest(t))
        else:
            h.update(repr(x).encode())
        out.append(h.hexdigest()[:24])
    return out


DIGEST_CHUNK = 1 << 25  # 64-bit words per step: bounds the digest's scratch memory to ~1 GiB
_MIX = 0x9E3779B97F4A7C15 - (1 << 64)  # odd 64-bit constant (as a signed int64)


def device_digest(x: torch.Tensor) -> bytes:
    """A digest of a tensor's bytes computed where the tensor lives, 32 bytes returned to the host.

    The bytes are read as 64-bit words w_i (zero-padded); two sums wrap modulo 2**64: sum(w_i * (2i+1))
    and sum(f(w_i) * (2i+1)) with f a multiply-xorshift mix, plus the xor of all words. Integer sums are
    order-independent, so the digest is the same on every run; moving, permuting or rewriting any word
    changes it (short of a deliberately constructed collision). It detects writes into inputs and inputs
    that differ between the reference and the candidate, at memory bandwidth instead of a copy to the host
    and a SHA-256 over gigabytes.
    """
    flat = x.detach().contiguous().reshape(-1).view(torch.uint8)
    pad = (-flat.numel()) % 8
    if pad:
        flat = torch.cat([flat, flat.new_zeros(pad)])
    words = flat.view(torch.int64)
    acc = torch.zeros(3, dtype=torch.int64, device=words.device)
    for start in range(0, words.numel(), DIGEST_CHUNK):
        w = words[start : start + DIGEST_CHUNK]
        weight = torch.arange(start, start + w.numel(), dtype=torch.int64, device=w.device) * 2 + 1
        mixed = (w ^ (w >> 31)) * _MIX
        mixed = mixed ^ (mixed >> 29)
        acc[0] += (w * weight).sum()
        acc[1] += (mixed * weight).sum()
        acc[2] ^= _xor_all(w)
    return acc.cpu().numpy().tobytes() + words.numel().to_bytes(8, "little")


def _xor_all(w: torch.Tensor) -> torch.Tensor:
    """XOR of all words, by halving (torch has no xor reduction)."""
    while w.numel() > 1:
        if w.numel() % 2:
            w = torch.cat([w, w.new_zeros(1)])
        half = w.numel() // 2
        w = w[:half] ^ w[half:]
    return w.reshape(-1)[0] if w.numel() else torch.zeros((), dtype=torch.int64, device=w.device)


def flatten_outputs(out: Any) -> list[Any]:
    """A forward's result as a list: one tensor, or the items of a tuple/list."""
    if isinstance(out, tuple | list):
        return list(out)
    return [out]


def shares_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    """True when the byte ranges of the two tensors' storages overlap."""
    if a.device != b.device:
        return False
    sa, sb = a.untyped_storage(), b.untyped_storage()
    a0, b0 = sa.data_ptr(), sb.data_ptr()
    if sa.nbytes() == 0 or sb.nbytes() == 0:
        return False
    return a0 < b0 + sb.nbytes() and b0 < a0 + sa.nbytes()


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
    bad = _structure(out, ref)
    if bad is not None:
        return bad
    floor = min(1.0, output_scale(ref) if scale is None else scale)
    o_all, r_all = out.detach().reshape(-1), ref.detach().reshape(-1)
    fast = out.dtype in (torch.float32, torch.float16, torch.bfloat16)
    n = o_all.numel()
    acc = _Acc(floor=floor)
    # three chunk-sized buffers for the whole comparison: a fresh 16 MiB tensor per step cost more in page
    # faults than its arithmetic (a subtraction into a new tensor 3.7x slower than into a reused one)
    scratch = torch.empty(3, min(n, COMPARE_CHUNK)) if fast and n else None
    for start in range(0, n, COMPARE_CHUNK):
        o, r = o_all[start : start + COMPARE_CHUNK], r_all[start : start + COMPARE_CHUNK]
        o32, r32 = o.to("cpu", torch.float32), r.to("cpu", torch.float32)
        if not (scratch is not None and _fp32_chunk(o32, r32, tol, acc, scratch[:, : o.numel()])):
            _fp64_chunk(o.to("cpu", torch.float64), r.to("cpu", torch.float64), tol, start, acc)
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
    # the floor stays out of the first line: for a secret seed that line is all a report shows (summarize)
    rule = f"tol={tol:g}: |out-ref| <= tol*(min(1, rms(ref))+|ref|)"
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


def summarize(results: list[tuple[int, Comparison]], secret: Collection[int] = ()) -> Correctness:
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
    )
