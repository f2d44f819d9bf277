"""The referee's socket to its runner (sandbox/channel.py, sandbox/commands.py) and the tensor slots they
share (sandbox/slots.py): typed frames, descriptors, whatever a hostile runner sends."""

from __future__ import annotations

import os
import struct
import threading

import pytest
import torch

from kbench.sandbox import slots
from kbench.sandbox.channel import MAX_BODY, Channel, ChannelError, pair
from kbench.sandbox.commands import Bind, Call, FromRunner, Ran, Run


def _pair() -> tuple[Channel, Channel]:
    a, b = pair()
    return Channel(a), Channel(b)


def test_typed_messages_cross_in_order() -> None:
    referee, runner = _pair()
    referee.send(Run(calls=[Call(inputs=3, literals=[None, 2.5])]))
    got, fds = runner.receive(Run, timeout=5)
    assert got == Run(calls=[Call(inputs=3, literals=[None, 2.5])]) and fds == []
    runner.send(Ran(outputs=[[]], seconds=0.1))
    answer, _ = referee.receive(FromRunner, timeout=5)
    assert isinstance(answer, Ran)


def test_descriptors_travel_with_their_message(tmp_path: object) -> None:
    referee, runner = _pair()
    slot = slots.allocate(7, slots.Layout.of([("float32", [4, 3]), ("int64", [5])]), "cpu")
    slot.tensors[0].copy_(torch.arange(12.0).reshape(4, 3))
    referee.send(Bind(slots=[slot.ref()]), slot.fds())
    bind, fds = runner.receive(Bind, timeout=5)
    mapped = slots.attach(bind.slots[0], fds, "cpu")
    assert torch.equal(mapped.tensors[0], torch.arange(12.0).reshape(4, 3))
    mapped.tensors[1].fill_(9)  # the runner writes: the referee sees it in its own mapping
    assert slot.tensors[1].tolist() == [9] * 5
    mapped.close()
    slot.close()


def test_a_malformed_or_unexpected_frame_is_refused() -> None:
    referee, runner = _pair()
    runner.sock.sendall(struct.pack("<II", 5, 0) + b"nope!")
    with pytest.raises(ChannelError, match="not JSON"):
        referee.receive(FromRunner, timeout=5)
    runner.sock.sendall(struct.pack("<II", 13, 0) + b'{"kind":"??"}')
    with pytest.raises(ChannelError, match="unexpected message"):
        referee.receive(FromRunner, timeout=5)
    runner.sock.sendall(struct.pack("<II", MAX_BODY + 1, 0))
    with pytest.raises(ChannelError, match="malformed frame"):
        referee.receive(FromRunner, timeout=5)


def test_silence_and_hang_ups_end_the_wait() -> None:
    referee, runner = _pair()
    with pytest.raises(ChannelError, match="in time"):
        referee.receive(FromRunner, timeout=0.1)
    runner.close()
    with pytest.raises(ChannelError, match="hung up"):
        referee.receive(FromRunner, timeout=5)


def test_a_large_message_arrives_whole() -> None:
    from kbench.sandbox.commands import BuildRequest

    referee, runner = _pair()
    source = "x" * (8 << 20)
    sent = threading.Thread(target=runner.send, args=(BuildRequest(arguments={"cpp_sources": source}),))
    sent.start()
    got, _ = referee.receive(FromRunner, timeout=10)
    sent.join()
    assert got.arguments["cpp_sources"] == source


def test_a_slot_layout_aligns_every_tensor() -> None:
    layout = slots.Layout.of([("float32", [3]), ("float16", [7, 7]), ("int8", [0])])
    assert [t.offset % slots.ALIGN for t in layout.tensors] == [0, 0, 0]
    assert layout.nbytes >= sum(t.nbytes for t in layout.tensors)
    slot = slots.allocate(1, layout, "cpu")
    assert [tuple(t.shape) for t in slot.tensors] == [(3,), (7, 7), (0,)]
    assert [t.dtype for t in slot.tensors] == [torch.float32, torch.float16, torch.int8]
    fd = slot.fd
    slot.close()
    with pytest.raises(OSError):
        os.fstat(fd)


def test_a_channel_past_select_s_descriptor_limit_still_waits() -> None:
    """A long-lived host may hold more than 1024 descriptors: a channel on one past that still waits for
    and receives its message (poll, where select refused such a descriptor)."""
    import resource
    import socket

    from kbench.sandbox.channel import Channel
    from kbench.sandbox.commands import Ready

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 2100:
        pytest.skip(f"this process may open no descriptor past {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 2100), hard))
    a, b = socket.socketpair()
    far = [socket.socket(fileno=os.dup2(s.fileno(), fd)) for s, fd in ((a, 2050), (b, 2051))]
    try:
        Channel(far[0]).send(Ready(confinement="far"))
        got, _ = Channel(far[1]).receive(Ready, timeout=5)
        assert got.confinement == "far"
    finally:
        for s in (*far, a, b):
            s.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
