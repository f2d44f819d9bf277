"""A runner's command loop (worker side): serve the referee's commands on a model, answer, repeat.

The referee (kbench/referee/) forked this process, walled it in and sends it commands over a socket
(sandbox/commands.py): map these slots, run these calls, copy their outputs, profile a call, check the
guards, quit. The runner answers with what it saw; the referee decides what any of it means. Nothing a
verdict depends on is computed here: no clock, no seed, no comparison, no key. A role (`Role`: the
candidate's in worker/candidate.py, the reference's in worker/reference.py) supplies the model and what
only it knows how to do (loading, profiling, compile checks).
"""

from __future__ import annotations

import os
import socket
import sys
import time
import traceback
from typing import Any

from kbench.sandbox import slots
from kbench.sandbox.channel import Channel, ChannelError
from kbench.sandbox.commands import (
    Bind,
    Bound,
    Command,
    CompileCheck,
    Copied,
    Copy,
    Failed,
    Guard,
    Guarded,
    Load,
    Loaded,
    OutputMeta,
    Place,
    Profile,
    Quit,
    Ran,
    Release,
    Run,
    RunnerSpec,
)
from kbench.types import Status

FD_ENV = "KBENCH_RUNNER_FD"  # the runner's end of the socket, inherited from the referee


class Role:
    """What a runner serves: the default answers suit a role without that ability."""

    def __init__(self, spec: RunnerSpec, channel: Channel) -> None:
        self.spec, self.channel = spec, channel

    def load(self) -> Any:
        raise NotImplementedError

    def model(self, mode: str) -> Any:
        raise NotImplementedError

    def profile(self, inputs: list[Any]) -> Any:
        return Failed(status=Status.RUNTIME_ERROR.value, message="this runner has no profiler")

    def guard(self, when: str) -> Guarded:
        return Guarded()

    def compile_check(self) -> Any:
        from kbench.sandbox.commands import Checked

        return Checked()

    def place(self) -> Any:
        return Loaded()

    def ablating(self, on: bool) -> None:
        """Make the candidate's kernels' results NaN while `on` (a role without kernels of its own: no-op)."""


def failure(exc: BaseException, default: Status) -> Failed:
    """A candidate's exception as data: out of memory is `oom`, anything else `default` with its trace."""
    import torch

    if isinstance(exc, torch.OutOfMemoryError | MemoryError):
        return Failed(status=Status.OOM.value, message=f"{type(exc).__name__}: {exc}"[:2000])
    tb = "".join(traceback.format_exception(exc)[-8:])
    return Failed(status=default.value, message=f"{type(exc).__name__}: {exc}\n{tb}"[-4000:])


def _flatten(out: Any) -> list[Any]:
    return list(out) if isinstance(out, tuple | list) else [out]


def _storage(t: Any) -> tuple[int, int]:
    """The bytes of a tensor's storage: [start, end)."""
    storage = t.untyped_storage()
    start = storage.data_ptr()
    return start, start + storage.nbytes()


def _elements(t: Any) -> tuple[int, int]:
    """The bytes a tensor's elements span (torch's strides are never negative): [first, last + 1)."""
    if t.numel() == 0:
        return (0, 0)
    size = t.element_size()
    first = t.data_ptr()
    return first, first + size + sum(
        (n - 1) * stride * size for n, stride in zip(t.shape, t.stride(), strict=True)
    )


class _Spans:
    """The memory of one input slot's tensors, measured once when it is mapped: an output whose storage
    overlaps it aliases an input (OutputMeta.aliases), the one whose elements its own overlap. A call's
    check is one look at the output's storage, not one at each input's (a slot's tensors share one
    storage): inside the timed window, a call's harness work is charged to it."""

    def __init__(self, tensors: list[Any]) -> None:
        self.each = [_elements(t) for t in tensors]
        spans = [_storage(t) for t in tensors if t.numel()]
        self.lo = min((a for a, _ in spans), default=0)
        self.hi = max((b for _, b in spans), default=0)
        self.cuda = bool(tensors) and tensors[0].is_cuda

    def aliases(self, value: Any, literals: list[Any]) -> int:
        """The index (among the call's inputs) of the input `value` overlaps, -1 if none."""
        if self.hi <= self.lo or value.is_cuda != self.cuda:
            return -1
        lo, hi = _storage(value)
        if hi <= self.lo or lo >= self.hi or hi <= lo:
            return -1
        tensors = [j for j, v in enumerate(literals) if v is None]  # the inputs the slot's tensors fill
        lo, hi = _elements(value)
        for k, (a, b) in enumerate(self.each):
            if lo < b and a < hi:
                return tensors[k]
        return tensors[0]  # its storage is the slot's, its elements between the inputs'


def _describe(value: Any, spans: _Spans, literals: list[Any]) -> tuple[Any, ...]:
    """One output as a hashable description (an OutputMeta's fields, as torch's own objects: `_meta` names
    them once per kind): the calls of a batch mostly share one."""
    import torch

    if type(value) is not torch.Tensor:
        return (type(value).__qualname__, None, (), None, -1)
    return ("Tensor", value.dtype, value.shape, value.device, spans.aliases(value, literals))


def _meta(described: tuple[Any, ...]) -> OutputMeta:
    from kbench.sandbox.protocol import dtype_name

    kind, dtype, shape, device, aliases = described
    return OutputMeta(
        type=kind,
        dtype=dtype_name(dtype) if dtype is not None else "",
        shape=list(shape),
        device=str(device) if device is not None else "",
        aliases=aliases,
    )


class Server:
    def __init__(self, channel: Channel, role: Role) -> None:
        self.channel, self.role = channel, role
        self.device = role.spec.device
        self.mapped: dict[int, slots.Mapped] = {}
        self.spans: dict[int, _Spans] = {}
        self.kept: list[list[Any]] = []  # the last Run's outputs, per call

    def _inputs(self, slot: int, literals: list[Any]) -> list[Any]:
        tensors = iter(self.mapped[slot].tensors)
        return [next(tensors) if v is None else v for v in literals]

    def _sync(self) -> None:
        if self.device.startswith("cuda"):
            import torch

            torch.cuda.synchronize()

    def run(self, cmd: Run) -> Any:
        stamps = [time.perf_counter_ns()]
        t0 = time.perf_counter()
        self.kept = []
        if not cmd.inputs:  # a calibration batch (referee/calibrate.py): known work on its slots
            tensors = [t for ident in cmd.outputs for t in self.mapped[ident].tensors]
            for tensor in tensors:
                for _ in range(
                    cmd.repeat
                ):  # as tight as the referee's own loop (referee/calibrate._own_work)
                    tensor.add_(1.0)
            self._sync()
            return Ran(seconds=time.perf_counter() - t0)
        model = self.role.model(cmd.mode)
        kinds: dict[tuple[Any, ...], int] = {}
        which = []
        self.role.ablating(cmd.ablate)
        try:
            for slot, literals in cmd.calls():
                out = _flatten(model(*self._inputs(slot, literals)))
                self.kept.append(out)
                spans = self.spans[slot]
                which.append(kinds.setdefault(tuple(_describe(v, spans, literals) for v in out), len(kinds)))
            stamps.append(time.perf_counter_ns())
            if cmd.outputs:
                self._copy_into(cmd.outputs)
            stamps.append(time.perf_counter_ns())
            self._sync()
            stamps.append(time.perf_counter_ns())
        except (Exception, SystemExit) as exc:
            self.kept = []
            return failure(exc, Status.RUNTIME_ERROR)
        finally:
            self.role.ablating(False)
        described = [[_meta(d) for d in key] for key in kinds]
        return Ran(kinds=described, which=which, seconds=time.perf_counter() - t0, stamps=stamps)

    def _copy_into(self, outputs: list[int]) -> None:
        """The kept outputs into the referee's output slots (a call's output the slot's shape and dtype)."""
        import torch

        for out, ident in zip(self.kept, outputs, strict=False):
            for value, target in zip(out, self.mapped[ident].tensors, strict=False):
                if (
                    isinstance(value, torch.Tensor)
                    and value.shape == target.shape
                    and value.dtype == target.dtype
                ):
                    target.copy_(value)
        self.kept = []

    def copy(self, cmd: Copy) -> Any:
        try:
            self._copy_into(cmd.outputs)
            self._sync()
        except (Exception, SystemExit) as exc:
            return failure(exc, Status.RUNTIME_ERROR)
        return Copied()

    def bind(self, cmd: Bind, fds: list[int]) -> Any:
        per = 0 if self.device.startswith("cuda") else 1
        for i, ref in enumerate(cmd.slots):
            mapped = slots.attach(ref, fds[i * per : (i + 1) * per], self.device)
            self.mapped[ref.ident], self.spans[ref.ident] = mapped, _Spans(mapped.tensors)
        return Bound()

    def serve(self) -> None:
        while True:
            try:
                cmd, fds = self.channel.receive(Command)
            except ChannelError:
                return  # the referee is gone or done: nothing more to do
            if isinstance(cmd, Quit):
                return
            try:
                answer = self.answer(cmd, fds)
            except (Exception, SystemExit) as exc:  # a command the candidate's code broke: its failure
                answer = failure(exc, Status.RUNTIME_ERROR)
            self.channel.send(answer)

    def answer(self, cmd: Any, fds: list[int]) -> Any:
        if isinstance(cmd, Bind):
            return self.bind(cmd, fds)
        if isinstance(cmd, Release):
            for ident in cmd.slots:
                mapped = self.mapped.pop(ident, None)
                self.spans.pop(ident, None)
                if mapped is not None:
                    mapped.close()
            return Bound()
        if isinstance(cmd, Run):
            return self.run(cmd)
        if isinstance(cmd, Copy):
            return self.copy(cmd)
        if isinstance(cmd, Load):
            return self.role.load()
        if isinstance(cmd, Profile):
            return self.role.profile(self._inputs(cmd.call.inputs, cmd.call.literals))
        if isinstance(cmd, Guard):
            return self.role.guard(cmd.when)
        if isinstance(cmd, CompileCheck):
            return self.role.compile_check()
        if isinstance(cmd, Place):
            return self.role.place()
        return Failed(status=Status.RUNTIME_ERROR.value, message=f"unexpected command {type(cmd).__name__}")


def main(make_role: Any) -> int:
    """The runner's life: its spec, then commands until the referee says quit or hangs up."""
    channel = Channel(socket.socket(fileno=int(os.environ.pop(FD_ENV))))
    spec, _ = channel.receive(RunnerSpec)
    role = make_role(spec, channel)
    Server(channel, role).serve()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # no interpreter teardown: the candidate's atexit hooks and destructors run nothing more
