"""The reference disk cache's policy on the suite's own output sizes: what a run visiting every problem in turn
finds cached on its later passes, kbench's GreedyDual-Size credits against least-recently-used.

Each problem's entry holds its fixed seeds' outputs at the preset (`cfg.seeds` of them; sizes worked out on
the meta device, nothing computed). Entries are made, read and trimmed by the cache's own functions
(`open_entry`, `commit_entry`, `touch_entry`, `trim_cache`) with sparse files of those sizes, so nothing
of that size is written. Least-recently-used is the same code with one credit for every entry (ties go by
last use). A hit is a reference run that needs no eager timing and no fixed-seed outputs.

    python benchmarks/reference_cache_policy.py --out OUT/reference_cache_policy.md [--record]
"""

from __future__ import annotations

import argparse
import contextlib
import random
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

from common import add_record_argument, command_line, environment, record_markdown, utc_now

from kbench.config import RunConfig
from kbench.evaluate import reference_cache
from kbench.evaluate.reference_cache import commit_entry, open_entry, read_cache, touch_entry, trim_cache
from kbench.problems import source_problems
from kbench.problems.inputs import flatten_outputs
from kbench.problems.loader import build_model, load
from kbench.sandbox.protocol import WorkerResult

POLICIES = ("greedy-dual-size", "lru")


def output_bytes(problem: Any, preset: str) -> int | None:
    """The bytes of one forward's outputs at `preset`, from the meta device; None where an operator has no
    meta kernel or the problem fails to build there."""
    import torch

    try:
        loaded = load(problem, preset)
        with torch.device("meta"):
            outputs = flatten_outputs(build_model(loaded)(*loaded.get_inputs()))
    except Exception:  # NotImplementedError (no meta kernel) and the like: left out, listed
        return None
    return sum(t.numel() * t.element_size() for t in outputs if isinstance(t, torch.Tensor))


@contextlib.contextmanager
def policy(name: str) -> Iterator[None]:
    if name == "lru":  # one credit for every entry: trim_cache orders them by last use alone
        with mock.patch.object(reference_cache, "size_credit", lambda floor, size: 0.0):
            yield
    else:
        yield


def simulate(
    entries: list[tuple[str, int]], max_gb: float, passes: int, shuffle: random.Random | None, root: Path
) -> list[int]:
    """Hits in each pass over `entries` (key, bytes) through a fresh cache of `max_gb` GB."""
    parent = Path(tempfile.mkdtemp(prefix="kbench-cache-policy-", dir=root)) / "reference"
    hits = []
    try:
        for _ in range(passes):
            order = shuffle.sample(entries, len(entries)) if shuffle else entries
            hit = 0
            for key, size in order:
                folder = parent / key.replace(":", "-").replace("/", "-")
                if read_cache(folder) is not None:
                    touch_entry(folder)
                    hit += 1
                    continue
                tmp = open_entry(folder)
                assert tmp is not None, f"cannot write under {parent}"
                with open(tmp / "outputs.bin", "wb") as f:
                    f.truncate(size)  # sparse: the size without the bytes
                commit_entry(tmp, folder, WorkerResult(), [])
                trim_cache(parent, max_gb, keep=folder)
            hits.append(hit)
    finally:
        shutil.rmtree(parent.parent, ignore_errors=True)
    return hits


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", default="kbench")
    ap.add_argument("--levels", default="1,2,3")
    ap.add_argument("--preset", default="full")
    ap.add_argument("--passes", type=int, default=3)
    default_gb = RunConfig().reference_cache_gb
    ap.add_argument(
        "--gb", default=f"10,{default_gb:g},40", help=f"cache sizes, comma-separated (default {default_gb:g})"
    )
    ap.add_argument("--seed", type=int, default=0, help="the shuffled passes' order")
    ap.add_argument("--root", type=Path, default=Path(tempfile.gettempdir()), help="where the caches lie")
    ap.add_argument("--out", type=Path, default=None)
    add_record_argument(ap)
    args = ap.parse_args()

    seeds = RunConfig().seeds
    levels = {int(x) for x in args.levels.split(",")}
    t0 = time.perf_counter()
    sizes, left_out = [], []
    for problem in source_problems(args.source):
        if problem.level not in levels:
            continue
        size = output_bytes(problem, args.preset)
        if size is None:
            left_out.append(problem.key)
        else:
            sizes.append((problem.key, size * seeds))
    sized_s = time.perf_counter() - t0
    total = sum(s for _, s in sizes)
    rows, metrics = [], {}
    for gb in (float(x) for x in args.gb.split(",")):
        for order in ("in turn", "shuffled"):
            for name in POLICIES:
                with policy(name):
                    shuffle = random.Random(args.seed) if order == "shuffled" else None
                    hits = simulate(sizes, gb, args.passes, shuffle, args.root)
                later = hits[1:]
                share = sum(later) / (len(sizes) * len(later))
                rows.append(f"| {gb:g} | {order} | {name} | {' / '.join(map(str, later))} | {share:.0%} |")
                if gb == default_gb:
                    metrics[f"{name}_{order.replace(' ', '_')}_hit_share"] = round(share, 3)
    env = environment()
    largest = sorted(sizes, key=lambda e: -e[1])[:5]
    text = "\n".join(
        [
            f"# Reference disk cache: hits on a run's later passes over the suite ({utc_now()})",
            "",
            f"{env['machine']}, Python {env['versions']['python']}, torch {env['versions']['torch']}; "
            f"`{command_line()}`",
            "",
            f"{len(sizes)} problems of levels {args.levels} (`{args.source}`, preset `{args.preset}`): one entry "
            f"each, the outputs of {seeds} fixed seeds, {total / 1e9:.1f} GB together; largest "
            + ", ".join(f"{key} {size / 1e9:.2f} GB" for key, size in largest)
            + f". Sizes worked out on the meta device in {sized_s:.0f} s"
            + (f"; left out (no meta kernel): {', '.join(left_out)}" if left_out else "")
            + ".",
            "",
            f"Each row: a fresh cache of the given size, {args.passes} passes over every problem, in suite order "
            "each time or in a new random order each pass; hits on passes 2 and later (a hit is a reference "
            "run with no eager timing and no fixed-seed outputs to compute).",
            "",
            "| cache GB | order | policy | hits per later pass | hit share |",
            "|---|---|---|---|---|",
            *rows,
            "",
        ]
    )
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    record_markdown(args.record, "reference-cache-policy", text, metrics=metrics)


if __name__ == "__main__":
    main()
