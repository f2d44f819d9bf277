"""`receive.json`: the device buffers the host offers a GPU candidate worker for its correctness outputs.

The host writes it (evaluate/device_outputs.py) into the worker's job folder, the worker waits for it and
copies each output into its slot's buffer (worker/inbox.py). Each slot's CUDA IPC handle is sealed with
the job's HMAC key, which only this worker holds besides the host.
"""

from __future__ import annotations

import hashlib
import hmac
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from kbench.sandbox.protocol import write_atomic

RECEIVE_FILE = "receive.json"


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


def write_offer(jobdir: Path, slots: dict[str, list[Slot | None]]) -> None:
    jobdir.mkdir(parents=True, exist_ok=True)
    write_atomic(jobdir / RECEIVE_FILE, Receive(slots=slots).model_dump_json())


def read_offer(jobdir: Path) -> Receive:
    """The host's offer; ValueError (pydantic's included) when it is not one."""
    return Receive.model_validate_json((jobdir / RECEIVE_FILE).read_text())
