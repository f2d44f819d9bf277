"""The timing loop's link to a model in this process (trusted in-process tools and tests): the same loop,
slots and calibration as a runner's (referee/timing.py), with no process between; `time_model` times one."""

from __future__ import annotations

from typing import Any

from kbench.referee.feed import Feed
from kbench.sandbox.commands import Call, OutputMeta
from kbench.types import TimingSettings, TimingStats


class LocalLink:
    """The Link for a model in this process: trusted in-process tools and tests time a model with the
    loop a runner is timed with, over the same slots."""

    def __init__(self, model: Any, feed: Feed) -> None:
        self.model, self.feed = model, feed
        self.kept: list[list[Any]] = []
        self.slots: dict[int, Any] = {}

    def _slot(self, ident: int) -> Any:
        slot = self.slots.get(ident)
        if slot is None:  # made since the last look: index them all again
            made = [f.slot for f in self.feed.inputs] + [
                s for pool in self.feed.outputs.values() for s in pool
            ]
            made += [self.feed.calibration] if self.feed.calibration is not None else []
            self.slots = {s.ident: s for s in made}
            slot = self.slots[ident]
        return slot

    def run(
        self, calls: list[Call], mode: str, outputs: list[int], repeat: int = 0
    ) -> list[list[OutputMeta]]:
        from kbench.sandbox.protocol import dtype_name

        if not calls:  # a calibration batch
            for tensor in [t for ident in outputs for t in self._slot(ident).tensors]:
                for _ in range(repeat):
                    tensor.add_(1.0)
            self.feed.ready()
            return []
        self.kept, metas = [], []
        for call in calls:
            tensors = iter(self._slot(call.inputs).tensors)
            out = self.model(*[next(tensors) if v is None else v for v in call.literals])
            out = list(out) if isinstance(out, tuple | list) else [out]
            self.kept.append(out)
            metas.append([
                OutputMeta(dtype=dtype_name(o.dtype), shape=list(o.shape), device=str(o.device)) for o in out
            ])  # fmt: skip
        self.copy(outputs)
        return metas

    def copy(self, outputs: list[int]) -> None:
        for out, ident in zip(self.kept, outputs, strict=False):
            for value, target in zip(out, self._slot(ident).tensors, strict=False):
                target.copy_(value)
        self.feed.ready()  # the device synchronised, as the runner does before it answers


def time_model(model: Any, get_inputs: Any, device: str, dtype: str, settings: TimingSettings) -> TimingStats:
    """Time `model` in this process with the loop a runner is timed with (fresh inputs per call from the
    problem's `get_inputs`, batches, the copy's charge): for trusted tools and benchmarks, which hold no
    candidate. No checked calls: nothing here is judged."""
    import torch

    from kbench.referee.timing import time_runner
    from kbench.sandbox.protocol import dtype_name

    feed = Feed(get_inputs, device, dtype, lambda slots: None)
    with torch.no_grad():
        out = model(*feed.generate(0))
        out = list(out) if isinstance(out, tuple | list) else [out]
        layout = [
            OutputMeta(dtype=dtype_name(o.dtype), shape=list(o.shape), device=str(o.device)) for o in out
        ]
        return time_runner(LocalLink(model, feed), feed, layout, settings).stats
