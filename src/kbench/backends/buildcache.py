"""The build cache as a runner sees it: `load_inline` answered from finished, verified builds (worker side).

A runner's candidate never builds into the shared cache: the runner may not write it (sandbox/confine.py).
Before the candidate is imported, `install` replaces `torch.utils.cpp_extension.load_inline` with a
wrapper that changes nothing about what the code means, only where it is built:

- the key is a hash of every argument that affects the binary (name, sources, functions, flags, include
  paths, CUDA/PCH switches) plus the toolchain (torch, Python, compiler, nvcc, CUDA arch list);
- the wrapper asks the referee for the build (`request`: the call's arguments as data); the referee
  answers from the cache or compiles it in a process of its own, checks it and moves it into the cache
  (referee/builds.py), and hands the job a copy in a folder of its own: a runner never reads the shared
  cache, so it learns neither its layout nor another candidate's binary;
- a build is loaded once every file's digest matches its manifest (`verified`): a file changed after
  its builder sealed it is never loaded. A trusted caller without a referee (`request` None) reads
  finished builds from the cache itself.

Unusual forms (`is_python_module=False`, an explicit `build_directory`) build as torch would, in the
runner's own folders. The wrapper also records the exported functions and wraps them to count the calls
that return normally: how the `no-custom-kernel` rule sees a CPU extension run.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kbench.backends import KernelRecorder, fastbuild

MANIFEST = "manifest.json"
_GLOBAL_RE = re.compile(r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?[\w:<>\s\*]*?\b(\w+)\s*\(")
_IGNORED_ARGS = ("verbose", "build_directory")
Request = Callable[[dict[str, Any]], Any]  # arguments -> commands.BuildAnswer


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


def file_hash(path: Path) -> str:
    import blake3

    h = blake3.blake3()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def read_manifest(folder: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((folder / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("files"), dict) else None


def verified(folder: Path) -> dict[str, Any] | None:
    """The manifest of a finished build, shim or header folder whose every listed file is a regular file
    with the listed digest; None for anything else (missing, unfinished, changed)."""
    manifest = read_manifest(folder)
    if manifest is None:
        return None
    for rel, digest in manifest["files"].items():
        path = folder / rel
        if not isinstance(rel, str) or ".." in Path(rel).parts or path.is_symlink() or not path.is_file():
            return None
        if file_hash(path) != digest:
            return None
    return manifest


def seal(folder: Path, files: list[str]) -> None:
    """Write `folder`'s manifest: the digest of each of `files` (relative paths)."""
    digests = {rel: file_hash(folder / rel) for rel in files}
    (folder / MANIFEST).write_text(json.dumps({"files": digests}, sort_keys=True))


def place(staging: Path, target: Path) -> None:
    """Rename a sealed staging folder into place; a folder already there that does not verify is replaced,
    one that does is kept (another builder finished first: its binary is the same)."""
    try:
        os.rename(staging, target)
        return
    except OSError:
        pass
    if verified(target) is None:
        shutil.rmtree(target, ignore_errors=True)
        try:
            os.rename(staging, target)
            return
        except OSError:
            pass
    shutil.rmtree(staging, ignore_errors=True)


def _count_calls(module: Any, recorder: KernelRecorder) -> None:
    for attr in dir(module):
        fn = getattr(module, attr)
        if attr.startswith("_") or not callable(fn):
            continue
        recorder.exported.add(attr)

        def counted(*args: Any, _fn: Callable[..., Any] = fn, _name: str = attr, **kwargs: Any) -> Any:
            return recorder.call(_name, _fn, args, kwargs)

        setattr(module, attr, counted)


def as_data(arguments: dict[str, Any]) -> dict[str, Any]:
    """load_inline's arguments as JSON data (what crosses to the referee): strings, booleans, None, lists
    and maps of strings. Anything else is a `ValueError` (the call fails as a build error)."""
    out: dict[str, Any] = {}
    for key, value in arguments.items():
        if key in _IGNORED_ARGS:
            continue
        if isinstance(value, tuple):
            value = list(value)
        if value is None or isinstance(value, str | bool | int):
            out[key] = value
        elif isinstance(value, list) and all(isinstance(v, str) for v in value):
            out[key] = value
        elif isinstance(value, dict) and all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            out[key] = value
        else:
            raise ValueError(f"load_inline argument {key!r} of type {type(value).__name__} is not supported")
    return out


def cached_load_inline(
    original: Callable[..., Any], recorder: KernelRecorder, root: Path, request: Request | None
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
                module = original(*args, **kwargs)  # unusual forms: torch's own behaviour, in its own folders
                recorder.cache_hit = False
            else:
                name = arguments["name"]
                folder = root / build_key(arguments)
                if request is None and verified(folder) is not None:
                    recorder.extra["build_recipe"] = "cache"  # a trusted caller reads the cache itself
                else:
                    folder = _requested(request, arguments, recorder)
                module = _import_module_from_library(name, str(folder), True)
        except Exception as exc:
            recorder.build_failed = True
            recorder.build_log = (recorder.build_log or str(exc))[-8000:]
            raise
        finally:
            recorder.build_seconds += time.perf_counter() - t0
        if module is not None and not isinstance(module, str):
            _count_calls(module, recorder)
        return module

    return load_inline


class BuildFailed(RuntimeError):
    """The referee's builder could not build the extension; the message is the compiler's."""


def _requested(request: Request | None, arguments: dict[str, Any], recorder: KernelRecorder) -> Path:
    if request is None:
        raise BuildFailed("this extension is not in the build cache, and nothing here may build it")
    answer = request(as_data(arguments))
    recorder.cache_hit = recorder.cache_hit and answer.cache_hit
    recorder.build_log = answer.log[-8000:]
    recorder.extra["build_recipe"] = answer.recipe
    if answer.errors:
        recorder.extra["fast_recipe_errors"] = dict(answer.errors)
    if answer.pch_seconds is not None:
        recorder.extra["pch_seconds"] = round(answer.pch_seconds, 1)
    if not answer.ok:
        raise BuildFailed(answer.log[-8000:] or "the build failed")
    folder = Path(answer.folder)
    if verified(folder) is None:
        raise BuildFailed(f"the finished build {folder.name} does not match its manifest")
    return folder


def install(recorder: KernelRecorder, root: Path, request: Request | None = None) -> None:
    """Replace `load_inline` in torch.utils.cpp_extension (before the candidate imports it)."""
    import torch.utils.cpp_extension as ext

    ext.load_inline = cached_load_inline(ext.load_inline, recorder, root, request)  # type: ignore[assignment]
