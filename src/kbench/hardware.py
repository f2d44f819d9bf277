"""The machine a result was measured on: GPU, driver, CUDA, torch, Triton, nvcc, ninja, CPU.

`fingerprint()` is stored with every verdict and baseline; two results are comparable only when the
fields that affect timing (GPU, driver, CUDA, torch) agree.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from kbench.version import VERSION

TIMING_FIELDS = ("gpu", "driver", "cuda", "torch", "device")


def command_output(cmd: list[str]) -> str:
    """What `cmd` prints on stdout ("" when it cannot run or times out)."""
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


@functools.lru_cache(maxsize=4)
def nvcc_version(nvcc: str | None = None) -> str | None:
    """The release of `nvcc` (default: the one on PATH, else under CUDA_HOME), None where there is none;
    asked once per process and path (`kbench env` reports it twice: the machine's, the cuda backend's)."""
    nvcc = (
        nvcc
        or shutil.which("nvcc")
        or (os.path.join(os.environ["CUDA_HOME"], "bin", "nvcc") if os.environ.get("CUDA_HOME") else None)
    )
    if not nvcc or not os.path.exists(nvcc):
        return None
    m = re.search(r"release ([\d.]+)", command_output([nvcc, "--version"]))
    return m.group(1) if m else "unknown"


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _gpu_info() -> dict[str, Any]:
    import torch

    if not torch.cuda.is_available():
        return {"gpu": None, "gpu_count": 0, "driver": None, "cuda": torch.version.cuda}
    props = torch.cuda.get_device_properties(0)
    driver = command_output(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]).strip()
    return {
        "gpu": props.name,
        "gpu_count": torch.cuda.device_count(),
        "sm": f"{props.major}.{props.minor}",
        "sm_count": props.multi_processor_count,
        "gpu_memory_gb": round(props.total_memory / 2**30, 1),
        "driver": driver.splitlines()[0] if driver else None,
        "cuda": torch.version.cuda,
    }


@lru_cache(maxsize=1)
def environment() -> dict[str, Any]:
    """Everything `kbench env` prints. Importing torch is the slow part (about 1-2 s)."""
    import torch

    try:
        import triton

        triton_version: str | None = triton.__version__
    except ImportError:
        triton_version = None
    info: dict[str, Any] = {
        "kbench": VERSION,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": triton_version,
        "nvcc": nvcc_version(),
        "ninja": shutil.which("ninja") is not None,
        "cpu": _cpu_name(),
        "cpu_count": os.cpu_count(),
        "os": f"{platform.system()} {platform.release()}",
        "bytecode": _bytecode(),
    }
    info.update(_gpu_info())
    info["device"] = "cuda" if info["gpu"] else "cpu"
    return info


def _bytecode() -> str:
    """Where fresh processes find torch's compiled bytecode (kbench/sandbox/bytecode.py): `installed` beside its
    sources, `kbench cache` in kbench's folder, or `none` (every fresh process compiles torch again)."""
    from kbench.sandbox import bytecode

    if bytecode.has_bytecode("torch"):
        return "installed"
    return "kbench cache" if bytecode.folder() is not None else "none"


@dataclass(frozen=True)
class GpuFacts:
    name: str  # "NVIDIA H200"
    capability: tuple[int, int]  # (9, 0)
    mig: bool = False  # split into MIG instances, which CUDA lists instead of the GPU


@lru_cache(maxsize=1)
def _nvml_all() -> list[GpuFacts] | None:
    """Every GPU of the machine in NVML's (PCI bus) order, read through the driver's NVML library with
    ctypes: no torch import, no CUDA context. None when NVML cannot answer. Read once per process (a
    service asks for every verdict)."""
    import ctypes

    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return None
    try:
        if nvml.nvmlInit_v2() != 0:
            return None
        count = ctypes.c_uint()
        if nvml.nvmlDeviceGetCount_v2(ctypes.byref(count)) != 0:
            return None
        found = []
        for index in range(count.value):
            handle = ctypes.c_void_p()
            name = ctypes.create_string_buffer(96)
            major, minor = ctypes.c_int(), ctypes.c_int()
            if (
                nvml.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(handle)) != 0
                or nvml.nvmlDeviceGetName(handle, name, len(name)) != 0
                or nvml.nvmlDeviceGetCudaComputeCapability(handle, ctypes.byref(major), ctypes.byref(minor))
            ):
                return None
            current, pending = ctypes.c_uint(), ctypes.c_uint()
            mig = nvml.nvmlDeviceGetMigMode(handle, ctypes.byref(current), ctypes.byref(pending)) == 0
            capability = (major.value, minor.value)
            found.append(
                GpuFacts(name.value.decode(errors="replace"), capability, mig and current.value == 1)
            )
        return found
    except AttributeError:  # an NVML too old for one of these calls
        return None
    finally:
        try:
            nvml.nvmlShutdown()
        except AttributeError:
            pass


@lru_cache(maxsize=1)
def _torch_dirs() -> tuple[str, ...]:
    """The folders of the torch package this interpreter would import, found without importing it."""
    import importlib.util

    spec = importlib.util.find_spec("torch")
    return tuple(spec.submodule_search_locations or ()) if spec else ()


def _torch_has_cuda() -> bool:
    """Whether the installed torch is a CUDA build (its CUDA library ships beside it), without importing it."""
    return any(os.path.exists(os.path.join(p, "lib", "libtorch_cuda.so")) for p in _torch_dirs())


def visible_gpus(env: Mapping[str, str] | None = None) -> list[GpuFacts] | None:
    """The GPUs torch would show this process (its CUDA_VISIBLE_DEVICES applied), in torch's order, from NVML
    in milliseconds where torch takes seconds to import and to initialise CUDA. None when this cannot be
    told without torch: NVML missing, MIG (by mode or by name), or a machine with different GPUs whose
    CUDA order (fastest first unless CUDA_DEVICE_ORDER=PCI_BUS_ID) NVML does not give. [] when torch would
    see none (a CPU build of torch, no GPU, CUDA_VISIBLE_DEVICES hiding them all)."""
    if env is None:
        env = os.environ
    if not _torch_has_cuda():
        return []
    machine = _nvml_all()
    if machine is None or any(gpu.mig for gpu in machine):
        return None
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        chosen = list(range(len(machine)))
    else:
        chosen = []
        for token in visible.split(","):  # CUDA stops at the first entry it cannot use
            token = token.strip()
            if not token.isdigit():
                if token.startswith(("GPU-", "MIG-")):
                    return None
                break
            if int(token) >= len(machine) or int(token) in chosen:
                break
            chosen.append(int(token))
    shown = [machine[i] for i in chosen]
    same = len(set(machine)) <= 1
    if not same and env.get("CUDA_DEVICE_ORDER") != "PCI_BUS_ID":
        return None
    return shown


@lru_cache(maxsize=1)
def torch_version() -> str:
    """`torch.__version__` ("2.11.0+cu130"), read from torch's version.py without importing torch (seconds
    on a GPU host); the installed distribution's metadata may drop the local part ("2.11.0")."""
    for folder in _torch_dirs():
        try:
            with open(os.path.join(folder, "version.py")) as fh:
                found = re.search(r"^__version__\s*=\s*['\"]([^'\"]+)['\"]", fh.read(), re.M)
        except OSError:
            continue
        if found:
            return found.group(1)
    import torch

    return str(torch.__version__)


def _cuda_index(device: str) -> int:
    return int(device.split(":", 1)[1]) if ":" in device else 0


def device_name(device: str) -> str:
    """The name of the GPU behind `device` ("NVIDIA H200"), or "cpu": without `environment()`'s imports and
    tool calls (about a second), for what a verdict needs on its critical path (NVML; torch where NVML
    cannot tell, `visible_gpus`)."""
    if not device.startswith("cuda"):
        return "cpu"
    gpus = visible_gpus()
    if gpus and _cuda_index(device) < len(gpus):
        return gpus[_cuda_index(device)].name
    import torch

    return str(torch.cuda.get_device_name(torch.device(device)))


def device_capability(device: str) -> tuple[int, int] | None:
    """The compute capability of the GPU behind `device`; None when torch sees no GPU."""
    gpus = visible_gpus()
    if gpus and _cuda_index(device) < len(gpus):
        return gpus[_cuda_index(device)].capability
    import torch

    if not torch.cuda.is_available():
        return None
    major, minor = torch.cuda.get_device_capability(torch.device(device))
    return major, minor


def gpu_count() -> int:
    """How many GPUs torch sees (NVML where it can tell, `visible_gpus`)."""
    gpus = visible_gpus()
    if gpus is not None:
        return len(gpus)
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def fingerprint(info: dict[str, Any] | None = None) -> str:
    """A short hash of the fields that change timings; the key for stored baselines."""
    info = info or environment()
    key = {k: info.get(k) for k in TIMING_FIELDS}
    if not info.get("gpu"):
        key["cpu"] = info.get("cpu")
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]
