"""The machine a result was measured on: GPU, driver, CUDA, torch, Triton, nvcc, ninja, CPU.

`fingerprint()` is stored with every verdict and baseline; two results are comparable only when the
fields that affect timing (GPU, driver, CUDA, torch) agree.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
from functools import lru_cache
from typing import Any

import kbench

TIMING_FIELDS = ("gpu", "driver", "cuda", "torch", "device")


def _run(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def _nvcc_version() -> str | None:
    nvcc = shutil.which("nvcc") or (
        os.path.join(os.environ["CUDA_HOME"], "bin", "nvcc") if os.environ.get("CUDA_HOME") else None
    )
    if not nvcc or not os.path.exists(nvcc):
        return None
    m = re.search(r"release ([\d.]+)", _run([nvcc, "--version"]))
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
    driver = _run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]).strip()
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
        "kbench": kbench.__version__,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": triton_version,
        "nvcc": _nvcc_version(),
        "ninja": shutil.which("ninja") is not None,
        "cpu": _cpu_name(),
        "cpu_count": os.cpu_count(),
        "os": f"{platform.system()} {platform.release()}",
    }
    info.update(_gpu_info())
    info["device"] = "cuda" if info["gpu"] else "cpu"
    return info


def device_name(device: str) -> str:
    """The name of the GPU behind `device` ("NVIDIA H200"), or "cpu": without `environment()`'s imports and
    tool calls (about a second), for what a verdict needs on its critical path."""
    if not device.startswith("cuda"):
        return "cpu"
    import torch

    return str(torch.cuda.get_device_name(torch.device(device)))


def fingerprint(info: dict[str, Any] | None = None) -> str:
    """A short hash of the fields that change timings; the key for stored baselines."""
    info = info or environment()
    key = {k: info.get(k) for k in TIMING_FIELDS}
    if not info.get("gpu"):
        key["cpu"] = info.get("cpu")
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]
