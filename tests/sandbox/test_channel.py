"""The referee's socket to its runner (sandbox/channel.py, sandbox/commands.py) and the tensor slots they
share (sandbox/slots.py): typed frames, descriptors, whatever a hostile runner sends."""

from __future__ import annotations

import json
import os
import struct
import threading

import pytest
import torch

from kbench.sandbox import slots
from kbench.sandbox.channel import MAX_BODY, Channel, ChannelError, pair
from kbench.sandbox.commands import Bind, Call, FromRunner, OutputMeta, Ran, Run


def _pair() -> tuple[Channel, Channel]:
    a, b = pair()
    return Channel(a), Channel(b)


def test_typed_messages_cross_in_order() -> None:
    referee, runner = _pair()
    referee.send(Run.of([Call(inputs=3, literals=[None, 2.5])]))
    got, fds = runner.receive(Run, timeout=5)
    assert got == Run.of([Call(inputs=3, literals=[None, 2.5])]) and fds == []
    assert got.calls() == [(3, [None, 2.5])]
    runner.send(Ran(kinds=[[]], which=[0], seconds=0.1))
    answer, _ = referee.receive(FromRunner, timeout=5)
    assert isinstance(answer, Ran) and answer.per_call() == [[]]


def test_a_batch_travels_compact_and_expands_to_its_calls() -> None:
    """A timed batch's command and answer are on the referee's clock: each distinct list of literals and
    of output descriptions travels once, and the calls name their entries."""
    calls = [Call(inputs=i, literals=[None, 2 if i % 3 else 5]) for i in range(300)]
    run = Run.of(calls, outputs=list(range(300)))
    assert run.literals == [[None, 5], [None, 2]] and run.calls() == [(c.inputs, c.literals) for c in calls]
    meta = OutputMeta(dtype="float32", shape=[4, 3], device="cpu")
    ran = Ran(kinds=[[meta]], which=[0] * 300)
    assert ran.per_call() == [[meta]] * 300
    referee, runner = _pair()
    referee.send(run)
    got, _ = runner.receive(Run, timeout=5)
    assert got == run


def test_a_call_without_its_entry_is_refused() -> None:
    """An answer whose calls name descriptions it did not send is no answer (the runner is untrusted)."""
    referee, runner = _pair()
    runner.sock.sendall(_frame({"kind": "ran", "kinds": [[]], "which": [0, 1]}))
    with pytest.raises(ChannelError, match="unexpected message"):
        referee.receive(FromRunner, timeout=5)
    with pytest.raises(ValueError, match="entry"):
        Run(inputs=[1, 2], literals=[[None]], which=[0])


def _frame(body: dict[str, object]) -> bytes:
    data = json.dumps(body).encode()
    return struct.pack("<II", len(data), 0) + data


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
