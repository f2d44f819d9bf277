"""A GPU candidate's correctness outputs compared where they lie: in device buffers the host owns.

Through files, an output crossed the host four times per seed: the worker's device-to-host copy and
write, the host's read and its comparison on the CPU -- 1.3 s of a 3.8 s warm verdict for 256 MiB
outputs on an H200, 3.9 s of 6.5 s at 1 GiB. Instead the host (this module) allocates one device
buffer per correctness output of the reference's dtype and shape (sandbox/devmem.py: each its own
allocation, filled with NaN), offers their IPC handles to the worker in `receive.json` (sandbox/offer.py), sealed with the
job's key, and the worker copies each output into its buffer (sandbox/inbox.py). After the worker has
exited, the host compares its buffers with the reference's outputs, mirrored on the same device, by the
same rule as on the CPU (problems/compare.py).

Why the verdict stays trustworthy: the host compares memory it allocated and the worker can only write,
never memory the worker names; an output not delivered is NaN and fails; the worker maps nothing else
of the host's (one allocation per buffer), and other jobs' workers cannot use the handles (sealed).
Only floating-point outputs are offered (NaN marks one never delivered); the rest, outputs of another
shape or dtype, and every sampled timed output go through files.
"""

from __future__ import annotations

import contextlib
import math
import secrets
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from kbench.evaluate.reference_cache import DeviceCopies, ReferenceData
from kbench.sandbox import devmem
from kbench.sandbox.offer import Layout, Slot, layout_of, read_layouts, seal, write_offer
from kbench.sandbox.protocol import KEY_BYTES
from kbench.sandbox.starter import start_torch_cuda_meanwhile

FREE_FACTOR = 4  # buffers are offered only where the device has this many times their size free
MIRROR_SHARE = 8  # the reference mirrors of one host use at most 1/8 of a device's memory


# Floating-point dtypes by the exchanged files' names, with their sizes: offers are made without torch.
FLOAT_BYTES = {
    "float64": 8, "float32": 4, "float16": 2, "bfloat16": 2,
    "float8_e4m3fn": 1, "float8_e4m3fnuz": 1, "float8_e5m2": 1, "float8_e5m2fnuz": 1,
}  # fmt: skip


class Receiver:
    """The device buffers of one job (a candidate's correctness outputs, or every output of a reference
    run); closing it (or leaving its `with`) frees them. Offers are made without torch (sandbox/devmem.py):
    the tensors over the buffers are made when the judge asks for them."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.key = secrets.token_bytes(KEY_BYTES)  # the job's HMAC key (run_worker takes it)
        # (seed, output) -> (pointer, bytes, dtype name, shape); tensors over them once asked for
        self.buffers: dict[tuple[str, int], tuple[int, int, str, list[int]]] = {}
        self._views: dict[tuple[str, int], Any] = {}
        self.why = ""  # why nothing was offered

    def __enter__(self) -> Receiver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def prepare(self) -> None:
        """Start CUDA in this process (the driver's context, then torch's), and load the comparison's
        kernels, so neither the first offer nor the verdict's first comparison on the device pays for them."""
        with contextlib.suppress(Exception):
            devmem.start(self.device)
            import torch

            from kbench.problems.compare import compare

            tiny = torch.ones(4, device=self.device)
            compare(tiny, tiny.clone(), 1e-4)

    def offer(self, jobdir: Path, layouts: Mapping[int, Sequence[Layout | None]]) -> None:
        """Allocate a buffer per floating-point output in `layouts` (seed -> per output (dtype, shape), or
        None), fill it with NaN and write the offer, which the waiting worker reads (empty when nothing can
        be offered: the outputs then go through files)."""
        slots: dict[str, list[Slot | None]] = {}
        try:
            wanted = []  # (seed, output, dtype, shape, outputs of the seed, bytes)
            for seed, outputs in layouts.items():
                for j, layout in enumerate(outputs):
                    size = FLOAT_BYTES.get(layout[0], 0) if layout is not None else 0
                    nbytes = math.prod(layout[1]) * size if layout is not None else 0
                    if layout is not None and nbytes:
                        wanted.append((seed, j, layout[0], list(layout[1]), len(outputs), nbytes))
            need = sum(w[-1] for w in wanted)
            if wanted and devmem.free_bytes(self.device) < FREE_FACTOR * need:
                raise devmem.DeviceMemoryError(
                    f"less than {FREE_FACTOR} x {need >> 20} MiB free on the device"
                )
            for seed, j, dtype, shape, count, nbytes in wanted:
                ptr = devmem.alloc(self.device, nbytes)
                self.buffers[(str(seed), j)] = (ptr, nbytes, dtype, shape)
                devmem.fill_nan(self.device, ptr, nbytes)
                handle = seal(self.key, str(seed), j, devmem.export(self.device, ptr))
                row = slots.setdefault(str(seed), [None] * count)
                row[j] = Slot(handle=handle, dtype=dtype, shape=shape)
            if wanted:
                devmem.synchronize(self.device)  # every buffer is NaN before the worker may write it
        except Exception as exc:  # noqa: BLE001  (any failure: the outputs take the file path)
            self.why = f"{type(exc).__name__}: {exc}"[:300]
            self.close()
            slots = {}
        write_offer(jobdir, slots)
        if slots:
            start_torch_cuda_meanwhile(str(self.device))  # the views and comparison on them come next

    def tensor(self, seed: str, index: int) -> Any:
        """A tensor over the host's buffer for output `index` of `seed` (None if none was offered)."""
        key = (seed, index)
        entry = self.buffers.get(key)
        if entry is None:
            return None
        if key not in self._views:
            import torch

            ptr, nbytes, dtype, shape = entry
            self._views[key] = devmem.view(ptr, nbytes, getattr(torch, dtype), shape, self.device)
        return self._views[key]

    def keep_only(self, keys: set[tuple[str, int]]) -> None:
        """Free the buffers not in `keys` ((seed, output) the worker delivered): one it wrote to a file
        instead (an output the reference kept on the CPU) would hold device memory until the end."""
        for key in [k for k in self.buffers if k not in keys and k not in self._views]:
            ptr = self.buffers.pop(key)[0]
            with contextlib.suppress(devmem.DeviceMemoryError):
                devmem.free(self.device, ptr)

    def close(self) -> None:
        if not self.buffers:
            return
        if self._views:
            import torch

            with contextlib.suppress(RuntimeError):
                torch.cuda.synchronize(self.device)  # nothing of torch's still reads or writes them
        self._views.clear()
        for ptr, *_ in self.buffers.values():
            with contextlib.suppress(devmem.DeviceMemoryError):
                devmem.free(self.device, ptr)
        self.buffers.clear()


def layouts(outputs: Mapping[Any, Sequence[Any]], seeds: Sequence[int]) -> dict[int, list[Layout | None]]:
    """Per seed of `seeds`, each output's layout, from tensors or from the signed result's `TensorFile`s
    (known before the files are read, so the worker need not wait for the host's read)."""
    by_seed = {int(k): v for k, v in outputs.items()}
    return {seed: [layout_of(item) for item in by_seed.get(seed, [])] for seed in seeds}


class LayoutWatch:
    """Hands `deliver` the reference worker's output layouts once: the moment the worker has signed them
    (sandbox/offer.py's LAYOUTS_FILE, looked for every POLL_S on a thread), or from its signed result
    (`settle`) if it wrote none. `known`: layouts of seeds the worker does not run (cached ones)."""

    POLL_S = 0.005

    def __init__(
        self,
        jobdir: Path,
        key: bytes,
        known: dict[int, list[Layout | None]],
        deliver: Callable[[dict[int, list[Layout | None]]], None],
    ) -> None:
        self.jobdir, self.key, self.known, self.deliver = jobdir, key, known, deliver
        self.early = False  # delivered before the worker exited
        self.error: BaseException | None = None  # what `deliver` raised on the thread (settle raises it)
        self._sent = False
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._poll, name="kbench-layouts", daemon=True)
        self._thread.start()

    def _send(self, found: dict[int, list[Layout | None]]) -> bool:
        with self._lock:
            if self._sent:
                return False
            self._sent = True
        self.deliver({**self.known, **found})
        return True

    def _poll(self) -> None:
        while not self._done.wait(self.POLL_S):
            found = read_layouts(self.jobdir, self.key)
            if found is not None:
                try:
                    self.early = self._send(found)
                except BaseException as exc:  # noqa: BLE001  (the evaluating thread raises it: stop)
                    self.error = exc
                return

    def stop(self) -> None:
        """The worker has exited: stop looking (a delivery under way completes first)."""
        self._done.set()
        self._thread.join()

    def settle(self, outputs: Mapping[Any, Sequence[Any]]) -> None:
        """Deliver from the worker's signed result (`outputs`: seed -> TensorFiles) if nothing was; raise
        what an early delivery raised, so a candidate waiting for its offer is not left waiting."""
        self.stop()
        if self.error is not None:
            raise self.error
        self._send(layouts(outputs, [int(seed) for seed in outputs]))


_mirror_lock = threading.Lock()
# (id of the copies' holder, seed, device) -> (the holder, bytes), least recently used first
_mirrors: OrderedDict[tuple[int, int, str], tuple[weakref.ref[DeviceCopies], int]] = OrderedDict()


def mirrored(ref: ReferenceData, seed: int, device: str) -> list[Any]:
    """The reference's outputs for `seed` on `device`, copied once and kept with `ref` (and its shared
    copies) while the mirrors of all references stay under 1/MIRROR_SHARE of the device's memory (least
    recently used go first)."""
    import torch

    target = torch.device(device)
    outputs = ref.outputs[seed]
    if target.type != "cuda" or all(_lies_on(r, target) for r in outputs):
        return list(outputs)  # already there (the CPU, or the reference delivered them to the device)
    holder = ref.device_outputs
    key = (id(holder), seed, device)
    with _mirror_lock:
        held = holder.get((seed, device))
        if held is not None and key in _mirrors:
            _mirrors.move_to_end(key)
            return held
    copies = [r.to(device) if isinstance(r, torch.Tensor) else r for r in ref.outputs[seed]]
    size = sum(c.numel() * c.element_size() for c in copies if isinstance(c, torch.Tensor))
    cap = torch.cuda.get_device_properties(torch.device(device)).total_memory // MIRROR_SHARE
    remember(holder, seed, device, copies, size, cap)
    return copies


def _lies_on(value: Any, device: Any) -> bool:
    """A tensor on `device` (an index-less "cuda" means the current one), or not a tensor at all."""
    import torch

    if not isinstance(value, torch.Tensor):
        return True
    here = value.device
    index = device.index if device.index is not None else torch.cuda.current_device()
    return here.type == device.type and here.index == index


def premirror(ref: ReferenceData, seeds: Sequence[int], device: str) -> None:
    """Mirror the reference's outputs of `seeds` onto `device` ahead of the judge (evaluate calls it before
    the candidate may time, so no copy falls in its timing loop); a failure here (memory) is left for the
    judge's own `mirrored` to report."""
    with contextlib.suppress(Exception):
        for seed in seeds:
            if seed in ref.outputs:
                mirrored(ref, seed, device)


def remember(holder: DeviceCopies, seed: int, device: str, copies: list[Any], size: int, cap: int) -> None:
    """Keep `copies` in `holder`; drop the least recently used mirrors of any reference past `cap` bytes."""
    with _mirror_lock:
        holder[(seed, device)] = copies
        _mirrors[(id(holder), seed, device)] = (weakref.ref(holder), size)
        for gone in [k for k, (owner, _) in _mirrors.items() if owner() is None]:
            del _mirrors[gone]  # their copies went with their reference
        while sum(n for _, n in _mirrors.values()) > cap and len(_mirrors) > 1:
            (_, old_seed, old_device), (owner, _) = _mirrors.popitem(last=False)
            alive = owner()
            if alive is not None:
                alive.pop((old_seed, old_device), None)
