"""The socket between a job's trusted side (kbench/referee/) and its runner: typed messages, file descriptors.

One end lives in the referee, the other in the runner it forked (worker/runner.py). Every message is a
frame -- an 8-byte header (body length, number of descriptors) then a JSON body -- and descriptors (the
shared memory of tensor slots, sandbox/slots.py) travel with the header as SCM_RIGHTS. What the runner
sends is untrusted: a frame longer than `MAX_BODY`, a body that is not one of the known messages, or a
runner that stays silent past the caller's limit ends the conversation with `ChannelError`, and the
referee judges the job from that.
"""

from __future__ import annotations

import array
import json
import select
import socket
import struct
import time
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError

MAX_BODY = 64 << 20  # a build request carries the candidate's sources: far below this
MAX_FDS = 64
_HEADER = struct.Struct("<II")


class ChannelError(Exception):
    """The peer hung up, sent something malformed, or said nothing in time."""


def pair() -> tuple[socket.socket, socket.socket]:
    """Two connected stream sockets: the referee keeps one, the runner inherits the other."""
    return socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)


class Channel:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.sock.setblocking(True)

    def fileno(self) -> int:
        return self.sock.fileno()

    def send(self, message: BaseModel, fds: list[int] | None = None) -> None:
        body = message.model_dump_json().encode()
        header = _HEADER.pack(len(body), len(fds or []))
        try:
            if fds:
                self.sock.sendmsg(
                    [header], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds).tobytes())]
                )
            else:
                self.sock.sendall(header)
            self.sock.sendall(body)
        except OSError as exc:
            raise ChannelError(f"the other side is gone ({exc.strerror or exc})") from None

    def _wait(self, deadline: float | None) -> None:
        if deadline is None:
            return
        remaining = deadline - time.monotonic()
        # poll, not select: a long-lived host (a service, a trainer) may hold descriptors past select's 1024
        poller = select.poll()
        poller.register(self.sock, select.POLLIN | select.POLLPRI)
        if remaining <= 0 or not poller.poll(remaining * 1000):
            raise ChannelError("no answer in time")

    def _exactly(self, n: int, deadline: float | None) -> bytes:
        chunks, got = [], 0
        while got < n:
            self._wait(deadline)
            chunk = self.sock.recv(min(n - got, 1 << 20))
            if not chunk:
                raise ChannelError("the other side hung up")
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def receive_raw(self, timeout: float | None = None) -> tuple[Any, list[int]]:
        """The next frame's JSON body (decoded, not validated) and the descriptors that came with it."""
        deadline = None if timeout is None else time.monotonic() + timeout
        self._wait(deadline)
        fds = array.array("i")
        try:
            data, ancillary, _, _ = self.sock.recvmsg(_HEADER.size, socket.CMSG_SPACE(MAX_FDS * fds.itemsize))
        except OSError as exc:
            raise ChannelError(f"the other side is gone ({exc.strerror or exc})") from None
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
        if not data:
            raise ChannelError("the other side hung up")
        if len(data) < _HEADER.size:
            data += self._exactly(_HEADER.size - len(data), deadline)
        length, count = _HEADER.unpack(data)
        if length > MAX_BODY or count != len(fds):
            _close(list(fds))
            raise ChannelError(f"malformed frame ({length} bytes, {count} descriptors announced)")
        body = self._exactly(length, deadline)
        try:
            return json.loads(body), list(fds)
        except ValueError:
            _close(list(fds))
            raise ChannelError("a frame that is not JSON") from None

    def receive(self, kind: Any, timeout: float | None = None) -> tuple[Any, list[int]]:
        """The next message, validated as `kind` (a model or a union of models), and its descriptors."""
        raw, fds = self.receive_raw(timeout)
        try:
            return _adapter(kind).validate_python(raw), fds
        except ValidationError as exc:
            _close(fds)
            first = exc.errors()[0]
            raise ChannelError(f"an unexpected message ({first['msg']} at {first['loc']})") from None

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


_adapters: dict[Any, TypeAdapter[Any]] = {}


def _adapter(kind: Any) -> TypeAdapter[Any]:
    if kind not in _adapters:
        _adapters[kind] = TypeAdapter(kind)
    return _adapters[kind]


def _close(fds: list[int]) -> None:
    import os

    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass
