"""Job-folder I/O: what a verdict's output files cost on the cache folder's disk and on a memory file system.

A verdict's worker writes every output it is checked on (`save_tensors`) and the host verifies, reads and
compares them (`read_result`, `load_tensors`, `correctness.compare` against the reference). For the
full preset's largest problems that is 1 GiB per output, 4 outputs per candidate (its correctness seeds;
sampled timed outputs that large come back as 2^20 elements) plus 7 for the reference. This times the round trip per GiB in each folder
(the comparison against a copy of the values).

    python benchmarks/scratch_io.py --gib 1 --files 4 --out OUT/scratch_io.md
"""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
import tempfile
import time
from pathlib import Path

import torch

from kbench.config import RunConfig
from kbench.hardware import environment
from kbench.problems.compare import compare
from kbench.sandbox.protocol import WorkerResult, read_result, write_result
from kbench.sandbox.tensorfiles import load_tensors, save_tensors

KEY = b"k" * 32
SHM = Path("/dev/shm")


def round_trip(root: Path, values: list[torch.Tensor]) -> dict[str, float]:
    folder = Path(tempfile.mkdtemp(prefix="kbench-scratch-io-", dir=root))
    try:
        t0 = time.perf_counter()
        files = save_tensors(folder, "out", values)
        write_result(folder, WorkerResult(outputs={"0": files}), KEY)
        t1 = time.perf_counter()
        result = read_result(folder, KEY)  # the host's check of every file
        assert result is not None
        t2 = time.perf_counter()
        back = load_tensors(folder, result.outputs["0"])
        t3 = time.perf_counter()
        assert all(compare(a, b, 1e-4).passed for a, b in zip(back, values, strict=True))
        t4 = time.perf_counter()
        return {
            "write_s": t1 - t0,
            "verify_s": t2 - t1,
            "load_s": t3 - t2,
            "compare_s": t4 - t3,
            "total_s": t4 - t0,
        }
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gib", type=float, default=1.0, help="size of each output")
    ap.add_argument("--files", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    n = int(args.gib * (1 << 30) / 4)
    values = [torch.randn(n) for _ in range(args.files)]
    total_gib = args.gib * args.files
    roots = {"cache folder (disk)": RunConfig().cache_dir, "/dev/shm (memory)": SHM}
    lines = []
    for label, root in roots.items():
        root.mkdir(parents=True, exist_ok=True)
        best = min((round_trip(root, values) for _ in range(args.repeats)), key=lambda r: r["total_s"])
        per = {k: v / total_gib for k, v in best.items()}
        lines.append(
            f"| {label} | {per['write_s']:.2f} | {per['verify_s']:.2f} | {per['load_s']:.2f} | "
            f"{per['compare_s']:.2f} | {per['total_s']:.2f} |"
        )
    env = environment()
    text = "\n".join(
        [
            "# Job-folder I/O per GiB of outputs",
            "",
            f"{env.get('cpu')}, {env.get('cpu_count')} CPUs, torch {env.get('torch')}, "
            f"{dt.date.today().isoformat()}. {args.files} outputs of {args.gib} GiB, best of {args.repeats}.",
            f"Command: `python benchmarks/scratch_io.py --gib {args.gib} --files {args.files}`",
            "",
            "| folder | worker write s/GiB | host verify s/GiB | host load s/GiB | host compare s/GiB | total s/GiB |",
            "|---|---|---|---|---|---|",
            *lines,
            "",
        ]
    )
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
