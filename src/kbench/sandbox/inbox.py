"""A GPU worker's outputs into the host's device buffers (worker side): a candidate's correctness outputs,
or every output of the reference (worker/reference.py).

With `JobSpec.receive` the host offers one device buffer per output it wants (sandbox/devmem.py,
evaluate/device_outputs.py) in `receive.json` (sandbox/offer.py), its IPC handles sealed with the job's key. An output whose
device, dtype and shape are the buffer's is copied into it on the device and listed as `received`;
anything else (another shape or dtype, a CPU tensor, a buffer that does not open) is written to a file,
where the host's comparison reports the structural mismatch.

Nothing here needs to be trusted: the host compares the buffer it owns, filled with NaN before the
offer, so an output that never arrived is a mismatch, and the buffers reach nothing else of the host's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kbench.sandbox import devmem
from kbench.sandbox.offer import RECEIVE_FILE, Slot, read_offer, unseal, wait_for
from kbench.sandbox.protocol import TensorFile, dtype_name

devmem.bind()  # the driver's functions, resolved before the candidate is imported


class Inbox:
    def __init__(self, jobdir: Path, key: bytes, wait_s: float | None = None) -> None:
        """Wait for the host's offer (written once the reference's layouts are known), at most `wait_s`
        (None: as long as the job's budget lets it; past `wait_s` every output goes to a file)."""
        self.key = key
        self.slots: dict[str, list[Slot | None]] = {}
        self.opened: dict[tuple[str, int], Any] = {}  # (seed, output) -> device tensor over the buffer
        self.pointers: list[int] = []
        self.failed = ""  # why outputs went to files after all
        if not wait_for(jobdir / RECEIVE_FILE, wait_s):
            self.failed = f"no offer within {wait_s:.0f} s"
            return
        try:
            self.slots = read_offer(jobdir).slots
        except (OSError, ValueError) as exc:
            self.failed = f"unreadable {RECEIVE_FILE}: {type(exc).__name__}"

    def _buffer(self, seed: str, index: int, out: Any) -> Any:
        slots = self.slots.get(seed) or []
        slot = slots[index] if index < len(slots) else None
        if slot is None or out.device.type != "cuda" or dtype_name(out.dtype) != slot.dtype:
            return None
        if list(out.shape) != slot.shape or out.numel() == 0:
            return None
        if (seed, index) not in self.opened:
            ptr = devmem.open_handle(unseal(self.key, seed, index, slot.handle), out.device)
            self.pointers.append(ptr)
            nbytes = out.numel() * out.element_size()
            self.opened[(seed, index)] = devmem.view(ptr, nbytes, out.dtype, slot.shape, out.device)
        return self.opened[(seed, index)]

    def deliver(self, seed: str, index: int, out: Any) -> TensorFile | None:
        """Copy `out` into the host's buffer for it; its entry, or None when it goes to a file instead."""
        import torch

        try:
            buffer = self._buffer(seed, index, out)
            if buffer is None:
                return None
            buffer.copy_(out)
            torch.cuda.synchronize()
        except (devmem.DeviceMemoryError, ValueError, RuntimeError) as exc:
            self.failed = self.failed or f"{type(exc).__name__}: {exc}"[:300]
            return None
        return TensorFile(
            name="",
            digest="",
            device=str(out.device),
            dtype=dtype_name(out.dtype),
            shape=list(out.shape),
            received=True,
        )

    def close(self) -> None:
        self.opened.clear()
        for ptr in self.pointers:
            try:
                devmem.close_handle(ptr)
            except devmem.DeviceMemoryError:
                pass
        self.pointers.clear()
