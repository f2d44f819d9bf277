"""Tensor slots: memory the referee owns and its runner maps, for a call's inputs or outputs.

The referee (kbench/referee/) writes each call's inputs into an input slot and reads the call's outputs
from an output slot; the runner (worker/runner.py) sees the same bytes as tensors, with no copy for the
inputs. A slot is one allocation holding a list of tensors at aligned offsets (`Layout`):

- on the CPU, a memory file (`memfd_create`) that both map shared; its descriptor reaches the runner with
  the message that binds it (sandbox/channel.py);
- on a GPU, one `cuMemAlloc` (sandbox/devmem.py) whose IPC handle the runner opens: an allocation of its
  own, so the runner reaches these bytes and nothing else of the referee's.

Whatever the runner writes into an input slot the referee sees (the mutation check compares the slot
with its pristine copy after every call); what it writes into an output slot after the referee has read
it changes nothing already read.
"""

from __future__ import annotations

import mmap
import os
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

ALIGN = 256  # bytes: cuMemAlloc's own alignment, kept for every tensor of a slot


class TensorLayout(BaseModel):
    dtype: str  # "float32"
    shape: list[int]
    offset: int = 0

    @property
    def nbytes(self) -> int:
        import torch

        count = 1
        for n in self.shape:
            count *= n
        return count * torch.empty((), dtype=getattr(torch, self.dtype)).element_size()


class Layout(BaseModel):
    """The tensors of one slot, in order, and the slot's size."""

    tensors: list[TensorLayout]
    nbytes: int

    @classmethod
    def of(cls, specs: list[tuple[str, list[int]]]) -> Layout:
        tensors, offset = [], 0
        for dtype, shape in specs:
            t = TensorLayout(dtype=dtype, shape=list(shape), offset=offset)
            tensors.append(t)
            offset += -(-t.nbytes // ALIGN) * ALIGN
        return cls(tensors=tensors, nbytes=max(offset, ALIGN))

    def key(self) -> tuple[tuple[str, tuple[int, ...]], ...]:
        return tuple((t.dtype, tuple(t.shape)) for t in self.tensors)


class SlotRef(BaseModel):
    """How a runner finds slot `ident`: its layout and, on a GPU, its IPC handle (hex); on the CPU its
    memory file comes with the message."""

    ident: int
    layout: Layout
    handle: str = ""


def _views(buffer: Any, layout: Layout, device: Any) -> list[Any]:
    import torch

    out = []
    for t in layout.tensors:
        dtype = getattr(torch, t.dtype)
        if t.nbytes == 0:
            out.append(torch.empty(t.shape, dtype=dtype, device=device))
            continue
        raw = buffer[t.offset : t.offset + t.nbytes]
        out.append(raw.view(dtype).view(t.shape))
    return out


@dataclass
class Slot:
    """A slot on the referee's side: the memory, its tensors, and what a runner needs to map it."""

    ident: int
    layout: Layout
    device: str
    tensors: list[Any]
    fd: int = -1  # CPU: the memory file
    ptr: int = 0  # GPU: the allocation
    handle: bytes = b""
    _map: Any = None

    def ref(self) -> SlotRef:
        return SlotRef(ident=self.ident, layout=self.layout, handle=self.handle.hex())

    def fds(self) -> list[int]:
        return [self.fd] if self.fd >= 0 else []

    def close(self) -> None:
        self.tensors = []
        if self._map is not None:
            try:
                self._map.close()
            except BufferError:
                pass  # a tensor still views it: the mapping goes with the last one
            self._map = None
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        if self.ptr:
            from kbench.sandbox import devmem

            try:
                devmem.free(self.device, self.ptr)
            except devmem.DeviceMemoryError:
                pass
            self.ptr = 0


def allocate(ident: int, layout: Layout, device: str) -> Slot:
    """A new slot for `layout` on `device` (referee side)."""
    import torch

    if not device.startswith("cuda"):
        fd = os.memfd_create(f"kbench-slot-{ident}", 0)
        os.ftruncate(fd, layout.nbytes)
        mm = mmap.mmap(fd, layout.nbytes, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        base = torch.frombuffer(mm, dtype=torch.uint8)
        return Slot(ident, layout, device, _views(base, layout, "cpu"), fd=fd, _map=mm)
    from kbench.sandbox import devmem

    ptr = devmem.alloc(device, layout.nbytes)
    base = devmem.view(ptr, layout.nbytes, torch.uint8, [layout.nbytes], device)
    return Slot(
        ident, layout, device, _views(base, layout, device), ptr=ptr, handle=devmem.export(device, ptr)
    )


@dataclass
class Mapped:
    """A slot on the runner's side."""

    ident: int
    layout: Layout
    tensors: list[Any]
    _keep: Any = None  # the mapping or device pointer the tensors view

    def close(self) -> None:
        self.tensors = []
        keep, self._keep = self._keep, None
        if isinstance(keep, int):
            from kbench.sandbox import devmem

            try:
                devmem.close_handle(keep)
            except devmem.DeviceMemoryError:
                pass


def attach(ref: SlotRef, fds: list[int], device: str) -> Mapped:
    """Map a slot the referee offered (runner side): its memory file, or its IPC handle on a GPU."""
    import torch

    if not device.startswith("cuda"):
        if len(fds) != 1:
            raise ValueError(f"slot {ref.ident}: expected one memory file, got {len(fds)}")
        try:
            mm = mmap.mmap(fds[0], ref.layout.nbytes, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fds[0])
        base = torch.frombuffer(mm, dtype=torch.uint8)
        return Mapped(ref.ident, ref.layout, _views(base, ref.layout, "cpu"), mm)
    from kbench.sandbox import devmem

    ptr = devmem.open_handle(bytes.fromhex(ref.handle), device)
    base = devmem.view(ptr, ref.layout.nbytes, torch.uint8, [ref.layout.nbytes], device)
    return Mapped(ref.ident, ref.layout, _views(base, ref.layout, device), ptr)
