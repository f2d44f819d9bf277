"""Device memory one process owns and another writes into: CUDA IPC through the driver API (ctypes).

The host hands a GPU candidate worker buffers for its correctness outputs (evaluate/device_outputs.py);
the worker copies each output into its buffer and the host compares it with the reference where it
lies, so outputs of hundreds of MiB no longer travel through files (worker/inbox.py).

Each buffer is its own `cuMemAlloc`, outside torch's caching allocator: an IPC handle opens the whole
allocation it names, and a block of the caching allocator shares its segment with other tensors (the
reference's outputs among them). The worker therefore reaches exactly its buffers and nothing else the
host holds; the host never opens a handle a worker made, so nothing a candidate does to its own
memory or context reaches the host's.
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


def _current(device: Any) -> None:
    """Make torch's context on `device` current on this thread (the driver calls act on it)."""
    import torch

    index = torch.device(device).index
    # initialises the device's primary context and makes it current on this thread
    torch.cuda.set_device(torch.cuda.current_device() if index is None else index)
    ctx = ctypes.c_void_p()
    _check(_driver().cuCtxGetCurrent(ctypes.byref(ctx)), "cuCtxGetCurrent")
    if not ctx.value:
        raise DeviceMemoryError("no current CUDA context")


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


def export(device: Any, ptr: int) -> bytes:
    """The IPC handle of an allocation made by `alloc` (64 bytes)."""
    _current(device)
    handle = _Handle()
    _check(_driver().cuIpcGetMemHandle(ctypes.byref(handle), ptr), "cuIpcGetMemHandle")
    return _unpack(handle)


def open_handle(handle: bytes) -> int:
    """Map another process's allocation into this one's current context; its device pointer."""
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
