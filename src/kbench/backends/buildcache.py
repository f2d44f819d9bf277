"""Content-addressed cache for `load_inline` builds, safe under concurrent builders (worker side).

The worker replaces `torch.utils.cpp_extension.load_inline` before importing the candidate with a
wrapper that changes nothing about what the code means, only where and how fast it is built:
- the key is a hash of every argument that affects the binary (name, sources, functions, flags, include
  paths, CUDA/PCH switches) plus the toolchain (torch, Python, compiler, nvcc, CUDA arch list);
- a hit (`ROOT/KEY/DONE` exists) imports the finished `.so` directly, without torch's lock file or a
  ninja run, so a worker killed mid-load can never leave a stale lock behind (upstream's hang);
- a miss builds in a private staging folder `ROOT/.staging/KEY-PID-RAND`, then renames it to
  `ROOT/KEY` (atomic on one filesystem). When two builders race, the first rename wins and the loser
  deletes its copy; both loaded identical binaries;
- a miss is built with the cheaper recipes of `fastbuild` first (per-operator headers for nvcc, light
  CUDA headers, a precompiled torch/extension.h), each failure falling through to the next, and last
  exactly as the candidate asked.

The wrapper also records the exported functions and wraps them to count the calls that return
normally, which is how the `no-custom-kernel` rule sees a CPU extension run (a call that raises, e.g.
a dtype check caught by a PyTorch fallback, did no work and does not count). Not protected: a hostile candidate can write into the
`builds` folder of the cache (its worker must, to build; sandbox/confine.py keeps it out of the rest).
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kbench.backends import KernelRecorder, fastbuild, pch

DONE = "DONE"
_GLOBAL_RE = re.compile(r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?[\w:<>\s\*]*?\b(\w+)\s*\(")
_IGNORED_ARGS = ("verbose", "build_directory")


@functools.lru_cache(maxsize=4)
def _tool_version(cmd: str) -> str:
    try:
        out = subprocess.run([cmd, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.strip().splitlines()[-1] if out.strip() else ""


def toolchain(with_cuda: bool) -> dict[str, str]:
    import torch

    info = {
        "torch": torch.__version__,
        "python": sys.version.split()[0],
        "cxx": _tool_version(os.environ.get("CXX", "c++")),
    }
    if with_cuda:
        info["nvcc"] = _tool_version("nvcc")
        info["arch"] = os.environ.get("TORCH_CUDA_ARCH_LIST", "")
        if not info["arch"] and torch.cuda.is_available():
            major, minor = torch.cuda.get_device_capability()
            info["arch"] = f"{major}.{minor}"
    return info


def build_key(arguments: dict[str, Any]) -> str:
    relevant = {k: v for k, v in arguments.items() if k not in _IGNORED_ARGS}
    blob = json.dumps(
        {"args": relevant, "toolchain": toolchain(fastbuild.with_cuda(relevant))},
        sort_keys=True,
        default=repr,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def _count_calls(module: Any, recorder: KernelRecorder) -> None:
    for attr in dir(module):
        fn = getattr(module, attr)
        if attr.startswith("_") or not callable(fn):
            continue
        recorder.exported.add(attr)

        def counted(*args: Any, _fn: Callable[..., Any] = fn, _name: str = attr, **kwargs: Any) -> Any:
            out = _fn(*args, **kwargs)
            recorder.hit(_name)  # only calls that return: a call that raises did no work
            return out

        setattr(module, attr, counted)


def _build_once(
    original: Callable[..., Any],
    arguments: dict[str, Any],
    root: Path,
    key: str,
    maker: pch.PchMaker | None = None,
) -> Any:
    staging = root / ".staging" / f"{key}-{os.getpid()}-{secrets.token_hex(4)}"
    staging.mkdir(parents=True)
    if maker is not None:
        maker.watch(staging)  # the PCH compiles from this build's ninja file while the build runs
    arguments = dict(arguments, build_directory=str(staging))
    try:
        module = original(**arguments)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    (staging / DONE).write_text(key)
    try:
        os.rename(staging, root / key)
    except OSError:  # another builder finished first; its binary is identical
        shutil.rmtree(staging, ignore_errors=True)
    return module


def _recipes(
    arguments: dict[str, Any], pch_folder: Path | None, root: Path
) -> list[tuple[str, dict[str, Any]]]:
    """Build attempts in order: per-operator headers, the light headers, then load_inline's own arguments
    (each fast recipe only where it applies; a precompiled bindings header with either when one exists,
    else first the same with lean bindings where the C++ sources only declare)."""
    attempts: list[tuple[str, dict[str, Any]]] = []
    if fastbuild.fast_recipe():
        fast, labels = arguments, []
        light = fastbuild.light_cuda_sources(fast)
        if light is not None:
            fast, labels = light, ["light-headers"]
        precompiled = pch.with_pch(fast, pch_folder) if pch_folder is not None else None
        if precompiled is not None:
            fast, labels = precompiled, [*labels, "pch"]
        shim = fastbuild.op_header_shim(root, fast) if fastbuild.op_headers() else None
        if shim is not None:
            attempts.append(("+".join(["op-headers", *labels]), fastbuild.with_include_first(fast, shim)))
        if labels:
            attempts.append(("+".join(labels), fast))
        bindings = fastbuild.bindings_shim(root, arguments) if precompiled is None else None
        if bindings is not None:
            label, first = attempts[0] if attempts else ("", arguments)
            lean = fastbuild.with_include_first(first, bindings)
            attempts.insert(0, ("+".join([*filter(None, [label]), "lean-bindings"]), lean))
    attempts.append(("standard" if not attempts else "standard (fast recipe failed)", arguments))
    return attempts


def _build(
    original: Callable[..., Any], arguments: dict[str, Any], root: Path, key: str, recorder: KernelRecorder
) -> Any:
    mode = pch.pch_mode()
    pch_folder = None
    if mode != "off" and fastbuild.fast_recipe():
        pch_folder = pch.pch_dir(root, arguments, toolchain(fastbuild.with_cuda(arguments)))
    attempts = _recipes(arguments, pch_folder, root)
    maker = None
    if mode == "make" and pch_folder is not None and not (pch_folder / pch.PCH_FILE).is_file():
        maker = pch.PchMaker(pch_folder)
    built = False
    try:
        for i, (label, attempt) in enumerate(attempts):
            try:
                module = _build_once(original, attempt, root, key, maker)
            except Exception as exc:
                if i == len(attempts) - 1:
                    raise
                recorder.extra.setdefault("fast_recipe_errors", {})[label] = str(exc)[-2000:]
                continue
            recorder.extra["build_recipe"] = label
            built = True
            break
    finally:
        spent = maker.finish(root / key if built else None) if maker is not None else None
        if spent is not None:
            recorder.extra["pch_seconds"] = round(spent, 1)
    return module


def cached_load_inline(
    original: Callable[..., Any], recorder: KernelRecorder, root: Path
) -> Callable[..., Any]:
    signature = inspect.signature(original)

    @functools.wraps(original)
    def load_inline(*args: Any, **kwargs: Any) -> Any:
        from torch.utils.cpp_extension import _import_module_from_library

        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        arguments = dict(bound.arguments)
        for src in fastbuild.as_list(arguments.get("cuda_sources")):
            recorder.defined.update(_GLOBAL_RE.findall(src))
        t0 = time.perf_counter()
        try:
            if not arguments.get("is_python_module", True) or arguments.get("build_directory"):
                module = original(*args, **kwargs)  # unusual forms: torch's own behaviour, uncached
                recorder.cache_hit = False
            else:
                key = build_key(arguments)
                done = root / key / DONE
                if done.exists():
                    module = _import_module_from_library(arguments["name"], str(root / key), True)
                    recorder.extra["build_recipe"] = "cache"
                else:
                    recorder.cache_hit = False
                    module = _build(original, arguments, root, key, recorder)
        except Exception as exc:
            recorder.build_failed = True
            recorder.build_log = str(exc)[-8000:]
            raise
        finally:
            recorder.build_seconds += time.perf_counter() - t0
        if module is not None and not isinstance(module, str):
            _count_calls(module, recorder)
        return module

    return load_inline


def install(recorder: KernelRecorder, root: Path) -> None:
    """Replace `load_inline` in torch.utils.cpp_extension (before the candidate imports it)."""
    import torch.utils.cpp_extension as ext

    root.mkdir(parents=True, exist_ok=True)
    ext.load_inline = cached_load_inline(ext.load_inline, recorder, root)  # type: ignore[assignment]
