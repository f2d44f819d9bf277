"""The files of the device-output exchange: `receive.json` and the reference's `layouts.json`.

`receive.json`: the device buffers the host offers a GPU worker: a candidate's for its correctness
outputs, the reference's for all its outputs. The host writes it (evaluate/device_outputs.py) into the
worker's job folder, the worker waits for it and copies each output into its slot's buffer
(sandbox/inbox.py). Each slot's CUDA IPC handle is sealed with
the job's HMAC key, which only this worker holds besides the host.

`layouts.json`: the reference worker's outputs, per seed each one's dtype and shape, signed with its job's
key and written the moment its GPU work is done -- before it writes the outputs themselves and exits --
so the host can size and offer the candidate's buffers while the candidate already holds the GPU.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kbench.files import write_atomic
from kbench.sandbox.protocol import ForgedResult, TensorFile, dtype_name, read_signed, write_signed

RECEIVE_FILE = "receive.json"
LAYOUTS_FILE = "layouts.json"
# Written by the host into a candidate's job folder once the reference started beside it has written its
# outputs and the host has read them: the candidate's timing loop waits for it (JobSpec.settle), so
# neither falls within the loop. A candidate that writes it itself only times itself beside that work.
SETTLED_FILE = "settled"
POLL_S = 0.002  # how often a waiting worker looks for the host's file
Layout = tuple[str, list[int]]  # an output's dtype name and shape


class Slot(BaseModel):
    """One device buffer the host offers for one output of one seed: its IPC handle, sealed (`seal`)."""

    handle: str  # hex
    dtype: str
    shape: list[int]


class Receive(BaseModel):
    """RECEIVE_FILE: per correctness seed, a slot (or None) per output of the reference's."""

    model_config = ConfigDict(extra="forbid")

    slots: dict[str, list[Slot | None]] = Field(default_factory=dict)


def _pad(key: bytes, seed: str, index: int) -> bytes:
    return hmac.new(key, f"receive:{seed}:{index}".encode(), hashlib.sha512).digest()


def seal(key: bytes, seed: str, index: int, handle: bytes) -> str:
    """An IPC handle readable only with the job's key: the job folder is readable by other jobs' workers,
    and a handle would let one write into another job's buffers."""
    return bytes(a ^ b for a, b in zip(handle, _pad(key, seed, index), strict=True)).hex()


def unseal(key: bytes, seed: str, index: int, sealed: str) -> bytes:
    return bytes(a ^ b for a, b in zip(bytes.fromhex(sealed), _pad(key, seed, index), strict=True))


def wait_for(path: Path, timeout_s: float | None = None) -> bool:
    """Wait until the host has written `path` (its offer, or SETTLED_FILE), looking every POLL_S; False
    when `timeout_s` passed first."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while not path.exists():
        if deadline is not None and time.monotonic() > deadline:
            return False
        time.sleep(POLL_S)
    return True


def mark_settled(jobdir: Path) -> None:
    jobdir.mkdir(parents=True, exist_ok=True)
    write_atomic(jobdir / SETTLED_FILE, "")


def write_offer(jobdir: Path, slots: dict[str, list[Slot | None]]) -> None:
    jobdir.mkdir(parents=True, exist_ok=True)
    write_atomic(jobdir / RECEIVE_FILE, Receive(slots=slots).model_dump_json())


def read_offer(jobdir: Path) -> Receive:
    """The host's offer; ValueError (pydantic's included) when it is not one."""
    return Receive.model_validate_json((jobdir / RECEIVE_FILE).read_text())


def layout_of(item: Any) -> Layout | None:
    """An output's layout, from a tensor or a signed result's `TensorFile` (None: neither, or an entry
    already delivered into a device buffer)."""
    if isinstance(item, TensorFile):
        return (item.dtype, list(item.shape)) if item.dtype and not item.received else None
    if hasattr(item, "dtype") and hasattr(item, "shape"):
        return (dtype_name(item.dtype), list(item.shape))
    return None


class Layouts(BaseModel):
    """LAYOUTS_FILE's signed body: per seed, each output's (dtype, shape) or None."""

    model_config = ConfigDict(extra="forbid")

    seeds: dict[str, list[tuple[str, list[int]] | None]]


def write_layouts(jobdir: Path, outputs: Mapping[str, Sequence[Any]], key: bytes) -> None:
    """Sign and write the layouts of `outputs` (seed -> tensors) for the host (read_layouts)."""
    body = Layouts(seeds={seed: [layout_of(v) for v in values] for seed, values in outputs.items()})
    write_signed(jobdir / LAYOUTS_FILE, body.model_dump_json(), key)


def read_layouts(jobdir: Path, key: bytes) -> dict[int, list[Layout | None]] | None:
    """The worker's signed layouts by seed; None while there are none, or when they do not verify (the
    host then waits for the signed result, which says the same or fails as forged)."""
    try:
        seeds = Layouts.model_validate_json(read_signed(jobdir / LAYOUTS_FILE, key)).seeds
        return {int(s): [None if x is None else (x[0], list(x[1])) for x in row] for s, row in seeds.items()}
    except (ForgedResult, OSError, ValueError, KeyError, TypeError, ValidationError):
        return None
