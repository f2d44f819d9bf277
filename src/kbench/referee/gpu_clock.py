"""GPU clock, temperature and clock-limit reasons while timing (worker side).

Read through NVML (the driver's library, by ctypes: no Python package needed) for the worker's own GPU,
matched by UUID, so CUDA_VISIBLE_DEVICES remapping does not matter. `ClockLog` keeps the samples that
`timing.time_callable` takes between timed calls and summarises them for the timing's stats.
"""

from __future__ import annotations

import ctypes
import functools
import math
from typing import Any

import torch

from kbench.types import ClockFacts


class Nvml:
    """SM clock, temperature and clock-limit reasons of one GPU through the driver's NVML (ctypes).

    Matched to the torch device by UUID, so a worker that sees its GPU as cuda:0 reads the right one. Every
    read is best-effort: without the library or the GPU in NVML's list, `read()` returns None.
    """

    _lib: Any = None
    _SM_CLOCK, _GPU_TEMP = 1, 0  # NVML_CLOCK_SM, NVML_TEMPERATURE_GPU

    def __init__(self, device: torch.device) -> None:
        self.handle: Any = None
        try:
            uuid = str(torch.cuda.get_device_properties(device).uuid)
            lib = Nvml._load()
            handle = ctypes.c_void_p()
            name = uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"
            if lib.nvmlDeviceGetHandleByUUID(name.encode(), ctypes.byref(handle)) == 0:
                self.handle = handle
        except (OSError, AttributeError, RuntimeError):
            self.handle = None

    @classmethod
    def _load(cls) -> Any:
        if cls._lib is None:
            lib = ctypes.CDLL("libnvidia-ml.so.1")
            if lib.nvmlInit_v2() != 0:
                raise OSError("nvmlInit failed")
            cls._lib = lib
        return cls._lib

    def max_sm_clock(self) -> float | None:
        """The GPU's maximum SM clock in MHz, or None."""
        if self.handle is None:
            return None
        clock = ctypes.c_uint()
        if self._lib.nvmlDeviceGetMaxClockInfo(self.handle, self._SM_CLOCK, ctypes.byref(clock)) != 0:
            return None
        return float(clock.value) or None

    def read(self) -> tuple[float, float, int] | None:
        """(SM clock MHz, temperature C, clock-limit reason bits) now, or None."""
        if self.handle is None:
            return None
        lib = self._lib
        clock, temp, reasons = ctypes.c_uint(), ctypes.c_uint(), ctypes.c_ulonglong()
        if lib.nvmlDeviceGetClockInfo(self.handle, self._SM_CLOCK, ctypes.byref(clock)) != 0:
            return None
        if lib.nvmlDeviceGetTemperature(self.handle, self._GPU_TEMP, ctypes.byref(temp)) != 0:
            return None
        if lib.nvmlDeviceGetCurrentClocksThrottleReasons(self.handle, ctypes.byref(reasons)) != 0:
            reasons.value = 0
        return float(clock.value), float(temp.value), int(reasons.value)


# NVML clock-limit reasons that mean the clock was held down (idle and application-clock settings are not)
LIMIT_REASONS = {
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x20: "sw_thermal",
    0x40: "hw_thermal",
    0x80: "power_brake",
}


class ClockLog:
    """GPU clock samples taken between timed calls."""

    EVERY_S = 0.05

    def __init__(self, device: torch.device) -> None:
        self.nvml = Nvml(device) if device.type == "cuda" else None
        self.samples: list[tuple[float, float, int]] = []
        self.last = -math.inf

    def sample(self, now_s: float, force: bool = False) -> None:
        if self.nvml is None or (not force and now_s - self.last < self.EVERY_S):
            return
        self.last = now_s
        got = self.nvml.read()
        if got is not None:
            self.samples.append(got)

    def facts(self) -> ClockFacts | None:
        """The samples' summary for the timing's stats; None without any (no NVML, a CPU)."""
        if not self.samples:
            return None
        clocks = [c for c, _, _ in self.samples]
        temps = [t for _, t, _ in self.samples]
        bits = functools.reduce(lambda a, b: a | b, (r for _, _, r in self.samples), 0)
        return ClockFacts(
            sm_clock_mhz=(min(clocks), max(clocks)),
            temp_c=(min(temps), max(temps)),
            clocks_moved=(max(clocks) - min(clocks)) / max(max(clocks), 1.0) > 0.05,
            clock_samples=len(self.samples),
            clock_limits=tuple(sorted(name for bit, name in LIMIT_REASONS.items() if bits & bit)),
        )


class ClockSettled:
    """Has the SM clock read at least `share` of its maximum for `hold_s` on end? (the warm-up's test)

    NVML's clock reading trails the clock itself by up to tens of milliseconds, so a high reading that has
    held over `hold_s` says the clock rose a while ago; it never says so early. A GPU whose clocks are
    locked or held below the maximum (power cap, thermals) never passes, and the warm-up runs its full
    length, as without this test. Readings are taken at most every `EVERY_S`."""

    EVERY_S = 0.005

    def __init__(self, nvml: Nvml, share: float = 0.97, hold_s: float = 0.02) -> None:
        self.nvml = nvml
        top = nvml.max_sm_clock()
        self.floor = share * top if top else math.inf
        self.hold_s = hold_s
        self.high_since: float | None = None
        self.last = -math.inf

    def __call__(self, now_s: float) -> bool:
        if self.floor == math.inf:
            return False
        if now_s - self.last >= self.EVERY_S:
            self.last = now_s
            got = self.nvml.read()
            if got is None or got[0] < self.floor:
                self.high_since = None
            elif self.high_since is None:
                self.high_since = now_s
        return self.high_since is not None and now_s - self.high_since >= self.hold_s
