"""Device memory one process owns and another writes into: CUDA IPC through the driver API (ctypes).

The host hands a GPU candidate worker buffers for its correctness outputs (evaluate/device_outputs.py);
the worker copies each output into its buffer and the host compares it with the reference where it
lies, so outputs of hundreds of MiB no longer travel through files (sandbox/inbox.py).

Each buffer is its own `cuMemAlloc`, outside torch's caching allocator: an IPC handle opens the whole
allocation it names, and a block of the caching allocator shares its segment with other tensors (the
reference's outputs among them). The worker therefore reaches exactly its buffers and nothing else the
host holds; the host never opens a handle a worker made, so nothing a candidate does to its own
memory or context reaches the host's.

Nothing here imports torch: the host offers buffers the moment a reference's layouts are signed, which on
a cold `kbench eval` came while its own torch import (seconds on a GPU host) was still under way. The
calls act on the device's primary context, the one torch's runtime uses, so `view` later wraps the same
memory in a tensor.
"""

from __future__ import annotations

import ctypes
import functools
from typing import Any

HANDLE_BYTES = 64  # sizeof(CUipcMemHandle)
_LAZY_PEER = 0x1  # CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS


class DeviceMemoryError(RuntimeError):
    """A driver call failed: the caller falls back to files."""


class _Handle(ctypes.Structure):
    # unsigned bytes: a c_char array reads back as bytes cut at the first NUL
    _fields_ = [("reserved", ctypes.c_ubyte * HANDLE_BYTES)]


def _pack(handle: bytes) -> _Handle:
    if len(handle) != HANDLE_BYTES:
        raise DeviceMemoryError(f"an IPC handle is {HANDLE_BYTES} bytes, not {len(handle)}")
    return _Handle((ctypes.c_ubyte * HANDLE_BYTES)(*handle))


def _unpack(handle: _Handle) -> bytes:
    return bytes(handle.reserved)


@functools.lru_cache(maxsize=1)
def _driver() -> Any:
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        raise DeviceMemoryError(f"no CUDA driver library ({exc})") from None
    u64p, sizep = ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_size_t)
    for name, args in {
        "cuInit": [ctypes.c_uint],
        "cuDeviceGet": [ctypes.POINTER(ctypes.c_int), ctypes.c_int],
        "cuDevicePrimaryCtxRetain": [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int],
        "cuCtxSetCurrent": [ctypes.c_void_p],
        "cuCtxSynchronize": [],
        "cuMemsetD8_v2": [ctypes.c_uint64, ctypes.c_ubyte, ctypes.c_size_t],
        "cuCtxGetCurrent": [ctypes.POINTER(ctypes.c_void_p)],
        "cuMemAlloc_v2": [u64p, ctypes.c_size_t],
        "cuMemFree_v2": [ctypes.c_uint64],
        "cuMemGetInfo_v2": [sizep, sizep],
        "cuIpcGetMemHandle": [ctypes.POINTER(_Handle), ctypes.c_uint64],
        "cuIpcOpenMemHandle_v2": [u64p, _Handle, ctypes.c_uint],
        "cuIpcCloseMemHandle": [ctypes.c_uint64],
        "cuGetErrorString": [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)],
    }.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = args, ctypes.c_int
    return lib


def bind() -> None:
    """Resolve the driver's functions now (a worker does it before the candidate is imported)."""
    try:
        _driver()
    except (DeviceMemoryError, AttributeError):
        pass


def _check(code: int, what: str) -> None:
    if code != 0:
        text = ctypes.c_char_p()
        _driver().cuGetErrorString(code, ctypes.byref(text))
        raise DeviceMemoryError(f"{what}: {(text.value or b'').decode() or f'CUDA error {code}'}")


def _index(device: Any) -> int:
    """The ordinal of "cuda" / "cuda:N" / torch.device (CUDA_VISIBLE_DEVICES applies, as for torch)."""
    text = str(device)
    if text.split(":")[0] != "cuda":
        raise DeviceMemoryError(f"not a CUDA device: {text}")
    return int(text.split(":")[1]) if ":" in text else 0


_contexts: dict[int, int] = {}  # ordinal -> its primary context, retained once for this process


def _current(device: Any) -> None:
    """Make `device`'s primary context current on this thread (the driver calls act on it)."""
    index = _index(device)
    ctx = _contexts.get(index)
    if ctx is None:
        driver = _driver()
        _check(driver.cuInit(0), "cuInit")
        dev, handle = ctypes.c_int(), ctypes.c_void_p()
        _check(driver.cuDeviceGet(ctypes.byref(dev), index), "cuDeviceGet")
        _check(driver.cuDevicePrimaryCtxRetain(ctypes.byref(handle), dev), "cuDevicePrimaryCtxRetain")
        if not handle.value:
            raise DeviceMemoryError("no primary CUDA context")
        ctx = _contexts.setdefault(index, handle.value)
    _check(_driver().cuCtxSetCurrent(ctx), "cuCtxSetCurrent")


def start(device: Any) -> None:
    """Initialise CUDA and `device`'s context in this process now (a fraction of a second), not at the
    first offer."""
    _current(device)


def free_bytes(device: Any) -> int:
    _current(device)
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    _check(_driver().cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)), "cuMemGetInfo")
    return int(free.value)


def alloc(device: Any, nbytes: int) -> int:
    _current(device)
    ptr = ctypes.c_uint64()
    _check(_driver().cuMemAlloc_v2(ctypes.byref(ptr), max(nbytes, 1)), "cuMemAlloc")
    return int(ptr.value)


def free(device: Any, ptr: int) -> None:
    _current(device)
    _check(_driver().cuMemFree_v2(ptr), "cuMemFree")


def fill_nan(device: Any, ptr: int, nbytes: int) -> None:
    """Set every byte to 0xFF: all ones is a NaN in every floating-point format (fp64 to fp8), so an output
    never delivered fails the comparison. Queued on the device: `synchronize` waits for it."""
    _current(device)
    _check(_driver().cuMemsetD8_v2(ptr, 0xFF, nbytes), "cuMemsetD8")


def synchronize(device: Any) -> None:
    """Wait until the device has done everything this process queued on it."""
    _current(device)
    _check(_driver().cuCtxSynchronize(), "cuCtxSynchronize")


def export(device: Any, ptr: int) -> bytes:
    """The IPC handle of an allocation made by `alloc` (64 bytes)."""
    _current(device)
    handle = _Handle()
    _check(_driver().cuIpcGetMemHandle(ctypes.byref(handle), ptr), "cuIpcGetMemHandle")
    return _unpack(handle)


def open_handle(handle: bytes, device: Any) -> int:
    """Map another process's allocation into this process's context on `device` (made current here: a
    thread where nothing has used CUDA yet has none); its device pointer."""
    _current(device)
    ptr = ctypes.c_uint64()
    _check(
        _driver().cuIpcOpenMemHandle_v2(ctypes.byref(ptr), _pack(handle), _LAZY_PEER), "cuIpcOpenMemHandle"
    )
    return int(ptr.value)


def close_handle(ptr: int) -> None:
    _check(_driver().cuIpcCloseMemHandle(ptr), "cuIpcCloseMemHandle")


class _Span:
    """Raw device bytes as the CUDA array interface describes them, for `torch.as_tensor`."""

    def __init__(self, ptr: int, nbytes: int) -> None:
        self.__cuda_array_interface__ = {
            "shape": (nbytes,),
            "typestr": "|u1",
            "data": (ptr, False),
            "version": 3,
            "strides": None,
        }


def view(ptr: int, nbytes: int, dtype: Any, shape: list[int], device: Any) -> Any:
    """A torch tensor over `nbytes` at `ptr` (no copy); the memory must outlive it."""
    import torch

    raw = torch.as_tensor(_Span(ptr, nbytes), device=device)
    return raw.view(dtype).view(shape)
