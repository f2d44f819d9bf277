"""`cuda`: CUDA extensions built by the candidate's own `load_inline(cuda_sources=...)` call.

The compile check extracts the CUDA source strings from the candidate's text (never executing it) and
compiles them with nvcc for one arch, without running anything. By default it compiles the kernels
only (`__global__`/`__device__` functions and the non-torch includes and macros before them), which takes
~2 s instead of ~75 s for a translation unit that includes torch's headers; `full=True` compiles the whole
source with torch's include paths (host wrappers included), lean headers first as the build does.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from kbench.backends import Backend, CompileCheck, register_backend
from kbench.backends.cudasrc import cuda_strings, kernels_only
from kbench.backends.fastbuild import light_cuda_sources, op_header_shim, op_headers
from kbench.errors import ConfigError


def nvcc_path() -> str | None:
    found = shutil.which("nvcc")
    if found:
        return found
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    candidate = Path(home, "bin", "nvcc") if home else None
    return str(candidate) if candidate and candidate.exists() else None


def _torch_includes() -> list[str]:
    import sysconfig

    from torch.utils.cpp_extension import include_paths

    return [*include_paths(), sysconfig.get_paths()["include"]]


_LAUNCH_BOUNDS = re.compile(r"__launch_bounds__\s*\([^)]*\)")
_GLOBAL = re.compile(r"__global__\b([^;{(]*)\(")
_IDENT = re.compile(r"[A-Za-z_]\w*")


def global_names(text: str) -> list[str]:
    """The `__global__` functions `text` (C/C++/CUDA source) defines, in order."""
    names = []
    for m in _GLOBAL.finditer(_LAUNCH_BOUNDS.sub(" ", text)):
        # `__global__ void __launch_bounds__(256) k(` -> the last identifier before `(` is the name.
        idents = _IDENT.findall(m.group(1))
        if idents:
            names.append(idents[-1])
    return names


@register_backend("cuda")
class CudaBackend(Backend):
    title = "CUDA"
    gpu_kernels = True
    needs_gpu = True
    default_on = "gpu"
    missing_kernel = "no __global__ kernel in any CUDA source string"
    detect_rank = 0  # before cpp: a CUDA candidate exports its launcher through load_inline too

    def find_kernels(self, ctx: Any) -> list[str]:
        """`__global__` function names in the source's C/C++ strings (its load_inline `cuda_sources`)."""
        return [name for cs in ctx.code_strings for name in global_names(cs.text)]

    def version(self) -> str | None:
        from kbench.hardware import nvcc_version

        nvcc = nvcc_path()
        release = nvcc_version(nvcc) if nvcc is not None else None
        return f"nvcc {release}" if release is not None else None

    def check_environment(self, device: str) -> None:
        from kbench.hardware import gpu_count

        if not device.startswith("cuda"):
            raise ConfigError(f"the cuda backend needs a CUDA device; use --device cuda (got {device!r})")
        if gpu_count() == 0:
            raise ConfigError("no CUDA GPU is visible to torch; install a CUDA build of torch and a driver")
        if nvcc_path() is None:
            raise ConfigError("load_inline needs nvcc: install the CUDA toolkit or set CUDA_HOME")
        if shutil.which("ninja") is None:
            raise ConfigError("load_inline needs ninja: pip install ninja")

    def compile_check(self, source: str, arch: str = "sm_90", full: bool = False) -> CompileCheck:
        nvcc = nvcc_path()
        if nvcc is None:
            raise ConfigError("compile-checking CUDA needs nvcc: install the CUDA toolkit or set CUDA_HOME")
        strings = cuda_strings(source)
        names = tuple(dict.fromkeys(n for text in strings for n in global_names(text)))
        if not strings:
            return CompileCheck(False, "no CUDA source string with a __global__ function found", names)
        code = "\n".join(strings) if full else kernels_only("\n".join(strings))
        flags = [f"-arch={arch}", "-c", "-std=c++17", "-O2"]
        t0 = time.perf_counter()
        if not full:
            ok, log = _nvcc(nvcc, code, flags)
            return CompileCheck(ok, log, names, time.perf_counter() - t0)
        # As the build does (backends/fastbuild.py): the per-operator headers on the light ones first, then
        # the light headers, the full header if those fail.
        flags += ["-DTORCH_EXTENSION_NAME=check", *[f"-I{p}" for p in _torch_includes()]]
        light = light_cuda_sources({"cuda_sources": [code]})
        lean = light["cuda_sources"][0] if light is not None else code
        with tempfile.TemporaryDirectory(prefix="kbench-shim-") as root:
            shim = op_header_shim(Path(root), {"cuda_sources": [lean]}) if op_headers() else None
            attempts = [(lean, [f"-I{shim}"])] if shim is not None else []
            attempts += [(lean, [])] if light is not None else []
            attempts.append(("#include <torch/extension.h>\n" + code, []))
            for attempt, first in attempts:
                ok, log = _nvcc(nvcc, "#include <torch/types.h>\n" + attempt, first + flags)
                if ok:
                    break
        return CompileCheck(ok, log, names, time.perf_counter() - t0)


def _nvcc(nvcc: str, code: str, flags: list[str]) -> tuple[bool, str]:
    with tempfile.TemporaryDirectory(prefix="kbench-nvcc-") as tmp:
        src = Path(tmp, "check.cu")
        src.write_text(code)
        proc = subprocess.run(
            [nvcc, *flags, str(src), "-o", str(Path(tmp, "check.o"))],
            capture_output=True,
            text=True,
            timeout=600,
        )
    log = re.sub(r"\S*/check\.cu", "check.cu", proc.stdout + proc.stderr)
    return proc.returncode == 0, log[-8000:]
