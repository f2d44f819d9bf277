"""Compile time of a load_inline CUDA translation unit under each fast-build recipe (no GPU needed).

    python benchmarks/build_recipes.py --out OUT [--limit N] [--jobs 1] [--recipes light,op-headers,lean]

For every CUDA source kbench ships (level-2 solutions, GPU anti-cheat fixtures, prompt examples,
benchmark candidates), the `cuda.cu` that load_inline would write is compiled with the flags and the
ninja rule load_inline would use (torch.utils.cpp_extension writes the build file; ninja compiles only
that object, for sm_90) under each recipe of backends/fastbuild.py asked for: `light` (`torch/types.h`
instead of `torch/extension.h`), `op-headers` (the per-operator `torch/types.h` shim, each operator's
generated header as torch ships it) and `lean` (the same shim with the leaner operator and CUDAContext
headers, what kbench builds with). The bindings file (`main.cpp`, precompiled-header recipe) is the same
under all of them and is not compiled here.

`--bindings` measures load_inline's other unit instead: the bindings file (`main.cpp`: `#include
<torch/extension.h>`, the C++ sources, the generated PYBIND11_MODULE) compiled by g++ with the source's
own `extra_cflags` and the real header (`full`, what a build without a precompiled header compiles), with
the lean bindings header where the C++ sources only declare (`lean-bindings`) and with the lite header
where they define functions (`lite-header`), that one also precompiled for the source's flags
(`lite-header+pch`: what a C++ candidate's build compiles once the cache holds that header); and, to size
a build that would bind the candidate's functions from a unit of its own, the C++ sources alone, without
the generated PYBIND11_MODULE, against a precompiled ATen-only `torch/extension.h` (`torch/types.h`:
`aten-only+pch`). Each precompiled header is made once per set of flags and not counted;
OUT/build_bindings.json and .md. `--corpus cpp` takes the C++ backend's sources instead of the CUDA ones
(level-2 solutions, anti-cheat fixtures, prompt examples).

Reported per source and overall: seconds per recipe (one compile at a time by default, so the times are
one core's), whether each shim compiled, and the operator headers it named. Writes OUT/build_recipes.json
and OUT/build_recipes.md. A shim is correct only if it also loads and runs the same: that needs a GPU
(benchmarks/selftest_gpu.py and benchmarks/throughput.py exercise it through the evaluator).
"""

from __future__ import annotations

import argparse
import ast
import datetime as dt
import hashlib
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
    got = load_inline_argument(path, "cuda_sources")
    return [got] if isinstance(got, str) else None


def load_inline_argument(path: Path, name: str) -> str | list[str] | None:
    """The `name=` argument of the file's load_inline call: a string built from module-level string
    constants (names or `A + B`), or a literal list of strings; None when it is neither."""
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
                if kw.arg == name:
                    got = value(kw.value)
                    if got is None and isinstance(kw.value, ast.List):
                        items = [value(e) for e in kw.value.elts]
                        return None if None in items else [i for i in items if i is not None]
                    return got
    return None


def corpus(kind: str = "cuda") -> list[Path]:
    src = ROOT / "src" / "kbench"
    if kind == "cpp":
        files = sorted((src / "suite" / "solutions" / "cpp" / "level2").glob("*.py"))
        files += sorted((src / "selftest" / "fixtures").rglob("*.cpp.py"))
        return files + sorted((src / "prompts" / "examples" / "cpp").glob("*.py"))
    files = sorted((src / "suite" / "solutions" / "cuda" / "level2").glob("*.py"))
    files += sorted((src / "selftest" / "fixtures").rglob("*.cuda.py"))
    files += sorted((src / "prompts" / "examples" / "cuda").glob("*.py"))
    files += sorted((ROOT / "benchmarks" / "candidates").glob("cuda_*.py"))
    return files


def compile_object(
    workdir: Path,
    main: str,
    cu: str,
    target: str,
    includes: list[str],
    cuda_cflags: list[str],
    cflags: list[str] | None = None,
) -> tuple[bool, float, str]:
    """Write load_inline's two files (main.cpp, cuda.cu) and its build file into `workdir`, compile the
    object `target` only (main.o or cuda.cuda.o); (ok, seconds, log)."""
    from torch.utils.cpp_extension import _write_ninja_file_to_build_library

    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "main.cpp").write_text(main)
    (workdir / "cuda.cu").write_text(cu)
    _write_ninja_file_to_build_library(
        path=str(workdir / "build.ninja"),
        name="kbench_recipe_probe",
        sources=[str(workdir / "main.cpp"), str(workdir / "cuda.cu")],
        extra_cflags=cflags or [],
        extra_cuda_cflags=cuda_cflags,
        extra_sycl_cflags=[],
        extra_ldflags=[],
        extra_include_paths=includes,
        with_cuda=bool(cu),
        with_sycl=False,
        is_standalone=False,
    )
    if not target:
        return True, 0.0, ""  # the build file only (its flags make a precompiled header: `precompiled`)
    t0 = time.perf_counter()
    run = subprocess.run(["ninja", "-C", str(workdir), target], capture_output=True, text=True)
    return run.returncode == 0, time.perf_counter() - t0, (run.stdout + run.stderr)[-3000:]


def compile_unit(
    sources: list[str], include_first: Path | None, workdir: Path, extra: list[str]
) -> tuple[bool, float, str]:
    """load_inline's cuda.cu for `sources`, compiled to its object; (ok, seconds, log)."""
    cu = "\n".join(["#include <torch/types.h>", "#include <cuda.h>", "#include <cuda_runtime.h>", *sources])
    includes = ([str(include_first)] if include_first is not None else []) + extra
    return compile_object(workdir, "", cu, "cuda.cuda.o", includes, ["-O3"])


RECIPES = ("light", "op-headers", "lean")
BINDINGS = ("full", "lean-bindings", "lite-header", "lite-header+pch", "aten-only+pch")
ATEN_ONLY = "#pragma once\n#include <torch/types.h>\n"  # aten-only+pch's torch/extension.h


def bindings_file(cpp: list[str], functions: list[str]) -> str:
    """main.cpp as load_inline writes it (with its default error handling)."""
    module = [f'm.def("{f}", torch::wrap_pybind_function({f}), "{f}");' for f in functions]
    return "\n".join(
        ["#include <torch/extension.h>", *cpp, "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {", *module, "}"]
    )


def compile_bindings(
    text: str, include_first: Path | None, workdir: Path, cflags: list[str], target: str = "main.o"
) -> tuple[bool, float, str]:
    """main.cpp with `text`, compiled to its object with `cflags`; (ok, seconds, log)."""
    includes = [str(include_first)] if include_first is not None else []
    return compile_object(workdir, text, "", target, includes, [], cflags)


def precompiled(root: Path, header: Path, cflags: list[str], workdir: Path) -> Path | None:
    """The folder of `header` precompiled with load_inline's flags for `cflags` (made on first use, as
    kbench's maker makes it: backends/pch.py), or None when it cannot be made."""
    from kbench.backends import pch

    key = hashlib.sha256(f"{header.read_text()}\0{cflags}".encode()).hexdigest()[:16]
    folder = root / "pch" / key
    if not (folder / pch.PCH_FILE).is_file():
        compile_bindings("", None, workdir, cflags, target="")  # its build file: the flags
        pch.make_pch(folder, workdir, header)
    return folder if (folder / pch.PCH_FILE).is_file() else None


def _unit(recipe: str, root: Path, cpp: list[str], functions: list[str], cflags: list[str],
          work: Path) -> tuple[str, Path | None] | None:  # fmt: skip
    """The text a recipe compiles and the folder searched first; None where the recipe does not apply."""
    if recipe == "full":
        return bindings_file(cpp, functions), None
    if recipe == "lean-bindings":
        folder = fastbuild.bindings_shim(root / "shims", {"cpp_sources": cpp})
        return None if folder is None else (bindings_file(cpp, functions), folder)
    lite = fastbuild.lite_header_shim(root / "shims", {"cpp_sources": cpp})
    if lite is None:
        return None
    if recipe == "lite-header":
        return bindings_file(cpp, functions), lite
    if recipe == "lite-header+pch":
        pch = precompiled(root, lite / "torch" / "extension.h", cflags, work / "pch-flags")
        return None if pch is None else (bindings_file(cpp, functions), pch)
    header = root / "aten-only" / "torch" / "extension.h"
    header.parent.mkdir(parents=True, exist_ok=True)
    header.write_text(ATEN_ONLY)
    pch = precompiled(root, header, cflags, work / "pch-flags")
    return None if pch is None else ("\n".join(["#include <torch/extension.h>", *cpp]), pch)


def measure_bindings(path: Path, root: Path, recipes: list[str]) -> dict[str, Any]:
    cpp = load_inline_argument(path, "cpp_sources")
    functions = load_inline_argument(path, "functions")
    row: dict[str, Any] = {"file": str(path.relative_to(ROOT))}
    if cpp is None or functions is None:
        return row | {"skipped": "cpp_sources or functions not built from string constants"}
    cpp, functions = fastbuild.as_list(cpp), fastbuild.as_list(functions)
    cflags = [str(f) for f in fastbuild.as_list(load_inline_argument(path, "extra_cflags"))]
    row["declarations_only"] = fastbuild.declarations_only({"cpp_sources": cpp})
    work = Path(tempfile.mkdtemp(prefix="bindings-", dir=root))
    for recipe in recipes:
        unit = _unit(recipe, root, cpp, functions, cflags, work)
        if unit is None:
            row[recipe] = None  # the recipe does not apply to these C++ sources
            continue
        ok, secs, log = compile_bindings(unit[0], unit[1], work / recipe.replace("+", "-"), cflags)
        row[recipe] = {"ok": ok, "s": round(secs, 2), "log": "" if ok else log}
    return row


def measure(path: Path, root: Path, extra: list[str], recipes: list[str]) -> dict[str, Any]:
    raw = cuda_sources(path)
    row: dict[str, Any] = {"file": str(path.relative_to(ROOT))}
    if raw is None:
        return row | {"skipped": "cuda_sources not built from string constants"}
    light = fastbuild.light_cuda_sources({"cuda_sources": raw})
    sources = fastbuild.as_list((light or {"cuda_sources": raw})["cuda_sources"])
    work = Path(tempfile.mkdtemp(prefix="recipe-", dir=root))
    for recipe in recipes:
        folder = None
        if recipe != "light":
            folder = fastbuild.op_header_shim(
                root / "shims", {"cuda_sources": sources}, lean=recipe == "lean"
            )
            if folder is None:
                row[recipe] = None  # autograd or frontend names: the recipe does not apply
                continue
            text = (folder / "torch" / "types.h").read_text()
            row["ops"] = [
                ln.split("/")[-1][:-3] for ln in text.splitlines() if ln.startswith("#include <ATen/ops/")
            ]
        ok, secs, log = compile_unit(sources, folder, work / recipe, extra)
        row[recipe] = {"ok": ok, "s": round(secs, 2), "log": "" if ok else log}
    return row


def _median(rows: list[dict[str, Any]], recipe: str) -> str:
    times = [r[recipe]["s"] for r in rows]
    return f"{statistics.median(times):.1f}" if times else "-"


def markdown(env: dict[str, Any], rows: list[dict[str, Any]], args: argparse.Namespace) -> str:
    recipes = args.recipes
    both = [r for r in rows if all(r.get(x) and r[x]["ok"] for x in recipes)]
    unit = "bindings files (main.cpp, g++)" if args.bindings else "CUDA units"
    flag = (" --bindings" if args.bindings else "") + (
        f" --corpus {args.corpus}" if args.corpus != "cuda" else ""
    )
    lines = [
        f"# Compile time of load_inline {unit} under each build recipe",
        "",
        f"{env.get('cpu')} ({env.get('cpu_count')} CPUs), torch {env.get('torch')}, nvcc {env.get('nvcc')}, "
        f"Python {env.get('python')}, {dt.date.today().isoformat()}. Command: `python benchmarks/build_recipes.py"
        f"{flag} --jobs {args.jobs} --recipes {','.join(recipes)}`. {args.jobs} compile(s) at a time.",
        "",
        "| measure | value |",
        "| --- | --- |",
        f"| sources | {len(rows)} |",
        f"| compiled with every recipe | {len(both)} |",
        *(f"| {x}, median s | {_median(both, x)} |" for x in recipes),
    ]
    if len(recipes) > 1 and both:
        first, last = recipes[0], recipes[-1]
        ratio = statistics.median(r[last]["s"] / max(r[first]["s"], 1e-9) for r in both)
        lines.append(f"| per-source ratio {last} / {first}, median | {ratio:.2f} |")
    for x in recipes:
        failed = [Path(r["file"]).name for r in rows if r.get(x) and not r[x]["ok"]]
        lines.append(f"| {x}: did not compile (the next recipe is used) | {', '.join(failed) or 'none'} |")
    no_shim = [Path(r["file"]).name for r in rows if any(x in r and r[x] is None for x in recipes)]
    why = "C++ sources that do more than declare" if args.bindings else "autograd/frontend names"
    lines += [
        f"| no shim ({why}) | {', '.join(no_shim) or 'none'} |",
        "",
        "| source | "
        + " | ".join(f"{x} s" for x in recipes)
        + ("" if args.bindings else " | operators named")
        + " |",
        "| --- | " + " | ".join("---" for _ in recipes) + ("" if args.bindings else " | ---") + " |",
    ]
    for r in rows:
        if "skipped" in r:
            continue
        cells = ["-" if r.get(x) is None else (r[x]["s"] if r[x]["ok"] else "failed") for x in recipes]
        if not args.bindings:
            cells.append(", ".join(r.get("ops", [])))
        lines.append(f"| {Path(r['file']).name} | {' | '.join(map(str, cells))} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument(
        "--recipes",
        default=None,
        help=f"comma-separated, of {', '.join(RECIPES)} (--bindings: {', '.join(BINDINGS)})",
    )
    ap.add_argument(
        "--bindings", action="store_true", help="the bindings file (main.cpp) instead of the CUDA unit"
    )
    ap.add_argument(
        "--corpus", choices=("cuda", "cpp"), default="cuda", help="whose sources (cpp: --bindings)"
    )
    ap.add_argument(
        "--include", action="append", default=[], help="extra include folder (e.g. cuBLAS/cuSPARSE headers)"
    )
    args = ap.parse_args()
    known = BINDINGS if args.bindings else RECIPES
    args.recipes = [x for x in (args.recipes or ",".join(known)).split(",") if x]
    if not args.recipes or set(args.recipes) - set(known):
        ap.error(f"--recipes: a comma-separated list of {', '.join(known)}")
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")
    import torch.utils.cpp_extension as ext

    if ext.CUDA_HOME is None and args.corpus == "cuda":  # a CPU torch does not look: CUDA_HOME or PATH's nvcc
        nvcc = shutil.which("nvcc")
        home = os.environ.get("CUDA_HOME") or (
            str(Path(os.path.realpath(nvcc)).parent.parent) if nvcc else ""
        )
        if not Path(home, "include", "cuda.h").is_file():
            sys.exit("no CUDA toolkit found: set CUDA_HOME")
        ext.CUDA_HOME = home
    files, seen = [], set()
    if args.corpus == "cpp" and not args.bindings:
        ap.error("--corpus cpp has no CUDA unit: add --bindings")
    for f in corpus(args.corpus):  # one file per distinct source (the fixtures share one library)
        key = str(load_inline_argument(f, "cpp_sources") if args.bindings else cuda_sources(f))
        if key not in seen:
            seen.add(key)
            files.append(f)
    files = files[: args.limit or None]
    root = Path(tempfile.mkdtemp(prefix="kbench-recipes-"))

    def one(f: Path) -> dict[str, Any]:
        return (
            measure_bindings(f, root, args.recipes)
            if args.bindings
            else measure(f, root, args.include, args.recipes)
        )

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        rows = []
        for row in pool.map(one, files):
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "ops"})[:300], flush=True)
    env = environment()
    name = "build_bindings" if args.bindings else "build_recipes"
    (args.out / f"{name}.json").write_text(json.dumps({"env": env, "rows": rows}, indent=1))
    (args.out / f"{name}.md").write_text(markdown(env, rows, args))
    print(markdown(env, rows, args))
    sys.exit(0)


if __name__ == "__main__":
    main()
