"""What one large output costs a verdict: the host's comparison, and a GPU output's write to a file.

    python benchmarks/output_handling.py --gib 1 --out OUT/output_handling.md

Per GiB of one fp32 output, in a job folder on /dev/shm:

- the host's comparison (`correctness.compare`) against the fp32 first pass it replaced: twelve passes
  over each chunk into fresh tensors, now seven into three buffers reused for every chunk;
- on a GPU, a correctness output written to a file: a pageable copy to the host, then the write and the
  digest (as before), against the stream through two pinned buffers (`tensorfiles.save_tensors` now).

Timings are the best of `--repeats`. On a CPU-only machine the GPU row is left out. (Earlier versions also
measured the sampled timed calls' outputs; timed calls are now checked inside the job, referee/checks.py.)
"""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from kbench.hardware import environment
from kbench.problems import compare as correctness
from kbench.sandbox.tensorfiles import digest, save_tensors

KEY = b"k" * 32
SCRATCH = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(tempfile.gettempdir())


def best(fn: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def twelve_pass_compare(o: torch.Tensor, r: torch.Tensor, tol: float) -> None:
    """The fp32 first pass as it was: twelve passes over each chunk."""
    of, rf = o.reshape(-1), r.reshape(-1)
    for s in range(0, of.numel(), correctness.COMPARE_CHUNK):
        oc, rc = of[s : s + correctness.COMPARE_CHUNK], rf[s : s + correctness.COMPARE_CHUNK]
        diff = (oc - rc).abs_()
        rabs = rc.abs()
        assert bool((diff <= rabs.mul(tol).add_(tol).mul_(1 - 1e-6)).all())
        float(diff.max())
        float(diff.sum(dtype=torch.float64))
        float(diff.div_(rabs.clamp_min_(1e-12)).max())


def pageable_write(value: torch.Tensor, path: Path) -> str:
    """A correctness output as the worker wrote it before: copy to the host, write, digest."""
    data = value.to("cpu").contiguous().reshape(-1).view(torch.uint8).numpy()
    with path.open("wb") as fh:
        fh.write(data.data)  # the array's own buffer, not a copy
    return digest(data)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    n = int(args.gib * (1 << 30) / 4)
    torch.manual_seed(0)
    ref = torch.randn(n)
    out = ref + 1e-6 * torch.randn(n)
    rows: list[tuple[str, float, float, str]] = []  # what, before, after (s per GiB), note

    def per_gib(x: float) -> float:
        return x / args.gib

    rows.append(
        (
            "host compare, whole output",
            per_gib(best(lambda: twelve_pass_compare(out, ref, 1e-4), args.repeats)),
            per_gib(best(lambda: correctness.compare(out, ref, 1e-4), args.repeats)),
            "twelve passes per chunk with fresh tensors → seven into reused buffers",
        )
    )
    if torch.cuda.is_available():
        gout = out.cuda()
        torch.cuda.synchronize()
        folder = Path(tempfile.mkdtemp(prefix="kbench-output-handling-", dir=SCRATCH))
        try:
            before = best(lambda: pageable_write(gout, folder / "a.bin"), args.repeats)
            after = best(lambda: save_tensors(folder, "b", [gout]), args.repeats)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        rows.append(
            ("GPU correctness output: worker write", per_gib(before), per_gib(after), "pinned stream")
        )
    env = environment()
    lines = [
        "# Output handling per GiB of one fp32 output",
        "",
        f"{env.get('gpu') or 'no GPU'}; {env.get('cpu')}, {env.get('cpu_count')} CPUs; torch {env.get('torch')}; "
        f"{dt.date.today().isoformat()}. Job folders in {SCRATCH}; best of {args.repeats}.",
        f"Command: `python benchmarks/output_handling.py --gib {args.gib:g} --repeats {args.repeats}`",
        "",
        "Compare row: the same pair, the fp32 pass as it was and as it is. GPU row: a pageable copy against",
        "the pinned stream.",
        "",
        "| step | before, s/GiB | now, s/GiB | note |",
        "|---|---|---|---|",
        *[f"| {w} | {b:.3f} | {a:.3f} | {note} |" for w, b, a, note in rows],
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)


if __name__ == "__main__":
    main()
