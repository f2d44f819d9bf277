"""Compile time of a load_inline CUDA translation unit under each fast-build recipe (no GPU needed).

    python benchmarks/build_recipes.py --out OUT [--limit N] [--jobs 1]

For every CUDA source kbench ships (level-2 solutions, GPU anti-cheat fixtures, prompt examples,
benchmark candidates), the `cuda.cu` that load_inline would write is compiled with the flags and the
ninja rule load_inline would use (torch.utils.cpp_extension writes the build file; ninja compiles only
that object, for sm_90), once with the light headers (`torch/types.h`, what kbench's fast recipe compiled
before) and once with the per-operator `torch/types.h` shim (backends/fastbuild.py). The bindings file
(`main.cpp`, precompiled-header recipe) is the same under both and is not compiled here.

Reported per source and overall: seconds per recipe (one compile at a time by default, so the times are
one core's), whether the shim compiled, and the operator headers it named. Writes OUT/build_recipes.json
and OUT/build_recipes.md. The shim is correct only if it also loads and runs the same: that needs a GPU
(benchmarks/selftest_gpu.py exercises it through the evaluator).
"""

from __future__ import annotations

import argparse
import ast
import datetime as dt
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from common import ROOT

from kbench.backends import fastbuild
from kbench.hardware import environment

_LOAD_INLINE = re.compile(r"load_inline\(")


def _literal_strings(tree: ast.Module) -> dict[str, str]:
    out: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                value = ast.literal_eval(node.value)
            except (ValueError, SyntaxError):
                continue
            if isinstance(value, str):
                out[node.targets[0].id] = value
    return out


def cuda_sources(path: Path) -> list[str] | None:
    """The `cuda_sources=` argument of the file's load_inline call, when it is built from module-level
    string constants (names or `A + B`), else None."""
    text = path.read_text()
    if not _LOAD_INLINE.search(text):
        return None
    tree = ast.parse(text)
    strings = _literal_strings(tree)

    def value(node: ast.AST) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Name):
            return strings.get(node.id)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = value(node.left), value(node.right)
            return None if left is None or right is None else left + right
        return None

    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and getattr(node.func, "id", getattr(node.func, "attr", "")) == "load_inline"
        ):
            for kw in node.keywords:
                if kw.arg == "cuda_sources":
                    got = value(kw.value)
                    return [got] if got is not None else None
    return None


def corpus() -> list[Path]:
    src = ROOT / "src" / "kbench"
    files = sorted((src / "suite" / "solutions" / "cuda" / "level2").glob("*.py"))
    files += sorted((src / "selftest_fixtures").rglob("*.cuda.py"))
    files += sorted((src / "prompts" / "examples" / "cuda").glob("*.py"))
    files += sorted((ROOT / "benchmarks" / "candidates").glob("cuda_*.py"))
    return files


def compile_unit(
    sources: list[str], include_first: Path | None, workdir: Path, extra: list[str]
) -> tuple[bool, float, str]:
    """Write load_inline's cuda.cu and build file into `workdir`, compile the object; (ok, seconds, log)."""
    from torch.utils.cpp_extension import _write_ninja_file_to_build_library

    workdir.mkdir(parents=True, exist_ok=True)
    cu = workdir / "cuda.cu"
    cu.write_text(
        "\n".join(["#include <torch/types.h>", "#include <cuda.h>", "#include <cuda_runtime.h>", *sources])
    )
    (workdir / "main.cpp").write_text("")
    includes = ([str(include_first)] if include_first is not None else []) + extra
    _write_ninja_file_to_build_library(
        path=str(workdir / "build.ninja"),
        name="kbench_recipe_probe",
        sources=[str(workdir / "main.cpp"), str(cu)],
        extra_cflags=[],
        extra_cuda_cflags=["-O3"],
        extra_sycl_cflags=[],
        extra_ldflags=[],
        extra_include_paths=includes,
        with_cuda=True,
        with_sycl=False,
        is_standalone=False,
    )
    t0 = time.perf_counter()
    run = subprocess.run(["ninja", "-C", str(workdir), "cuda.cuda.o"], capture_output=True, text=True)
    return run.returncode == 0, time.perf_counter() - t0, (run.stdout + run.stderr)[-3000:]


def measure(path: Path, root: Path, extra: list[str]) -> dict[str, Any]:
    raw = cuda_sources(path)
    row: dict[str, Any] = {"file": str(path.relative_to(ROOT))}
    if raw is None:
        return row | {"skipped": "cuda_sources not built from string constants"}
    light = fastbuild.light_cuda_sources({"cuda_sources": raw})
    sources = fastbuild.as_list((light or {"cuda_sources": raw})["cuda_sources"])
    shim = fastbuild.op_header_shim(root / "shims", {"cuda_sources": sources})
    work = Path(tempfile.mkdtemp(prefix="recipe-", dir=root))
    ok, secs, log = compile_unit(sources, None, work / "light", extra)
    row["light"] = {"ok": ok, "s": round(secs, 2), "log": "" if ok else log}
    if shim is None:
        return row | {"shim": None}
    text = (shim / "torch" / "types.h").read_text()
    row["ops"] = [ln.split("/")[-1][:-3] for ln in text.splitlines() if ln.startswith("#include <ATen/ops/")]
    ok, secs, log = compile_unit(sources, shim, work / "shim", extra)
    row["shim"] = {"ok": ok, "s": round(secs, 2), "log": "" if ok else log}
    return row


def markdown(env: dict[str, Any], rows: list[dict[str, Any]], args: argparse.Namespace) -> str:
    both = [r for r in rows if r.get("shim") and r["shim"]["ok"] and r["light"]["ok"]]
    light = [r["light"]["s"] for r in both]
    shim = [r["shim"]["s"] for r in both]
    failed = [r["file"] for r in rows if r.get("shim") and not r["shim"]["ok"]]
    lines = [
        "# Compile time of load_inline CUDA units: light headers vs per-operator headers",
        "",
        f"{env.get('cpu')} ({env.get('cpu_count')} CPUs), torch {env.get('torch')}, nvcc {env.get('nvcc')}, "
        f"Python {env.get('python')}, {dt.date.today().isoformat()}. Command: `python benchmarks/build_recipes.py "
        f"--jobs {args.jobs}`. sm_90 objects; {args.jobs} compile(s) at a time.",
        "",
        "| measure | value |",
        "| --- | --- |",
        f"| sources | {len(rows)} |",
        f"| compiled with both recipes | {len(both)} |",
        f"| light headers, median s | {statistics.median(light):.1f} |" if light else "| light headers | - |",
        f"| per-operator headers, median s | {statistics.median(shim):.1f} |" if shim else "| shim | - |",
        f"| per-source ratio, median | {statistics.median(s / max(lt, 1e-9) for s, lt in zip(shim, light, strict=True)):.2f} |"
        if shim
        else "| ratio | - |",
        f"| shim did not compile (light recipe used) | {', '.join(failed) or 'none'} |",
        f"| no shim (autograd/frontend names) | {', '.join(r['file'] for r in rows if 'shim' in r and r['shim'] is None) or 'none'} |",
        "",
        "| source | light s | op-headers s | operators named |",
        "| --- | --- | --- | --- |",
    ]
    for r in rows:
        if "light" not in r:
            continue
        sh = r.get("shim")
        lines.append(
            f"| {Path(r['file']).name} | {r['light']['s'] if r['light']['ok'] else 'failed'} | "
            f"{'-' if sh is None else (sh['s'] if sh['ok'] else 'failed')} | {', '.join(r.get('ops', []))} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument(
        "--include", action="append", default=[], help="extra include folder (e.g. cuBLAS/cuSPARSE headers)"
    )
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")
    import torch.utils.cpp_extension as ext

    if ext.CUDA_HOME is None:  # a CPU build of torch does not look for nvcc: CUDA_HOME or the nvcc on PATH
        nvcc = shutil.which("nvcc")
        home = os.environ.get("CUDA_HOME") or (
            str(Path(os.path.realpath(nvcc)).parent.parent) if nvcc else ""
        )
        if not Path(home, "include", "cuda.h").is_file():
            sys.exit("no CUDA toolkit found: set CUDA_HOME")
        ext.CUDA_HOME = home
    files, seen = [], set()
    for f in corpus():  # one file per distinct CUDA source (the fixtures share one library)
        key = str(cuda_sources(f))
        if key not in seen:
            seen.add(key)
            files.append(f)
    files = files[: args.limit or None]
    root = Path(tempfile.mkdtemp(prefix="kbench-recipes-"))
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        rows = []
        for row in pool.map(lambda f: measure(f, root, args.include), files):
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "ops"})[:300], flush=True)
    env = environment()
    (args.out / "build_recipes.json").write_text(json.dumps({"env": env, "rows": rows}, indent=1))
    (args.out / "build_recipes.md").write_text(markdown(env, rows, args))
    print(markdown(env, rows, args))
    sys.exit(0)


if __name__ == "__main__":
    main()
