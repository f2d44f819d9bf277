"""A job's inputs and outputs as the referee holds them: slots it fills, reads and checks (trusted).

Every call the runner makes reads an input slot the referee filled under a seed (problems/inputs.py: the
same generator the reference uses, so a checked call's inputs are bit-identical to those its expected
output was computed from) and writes an output slot the referee reads. The referee keeps a pristine copy
of every input it wrote: after each call, a slot whose bytes changed is `cheat inputs-mutated`, on
correctness and timed calls alike.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from kbench.referee import Stop
from kbench.sandbox.channel import MAX_FDS
from kbench.sandbox.commands import Call, OutputMeta
from kbench.sandbox.slots import Layout, Slot, allocate
from kbench.types import Status

_ids = itertools.count(1)
# the timing loop's calibration slot (referee/calibrate.py): work a device does in ~10 to 50 microseconds;
# on the CPU under torch's parallel grain, so one thread adds to it in the runner and the referee alike
CALIBRATION_NUMEL_CUDA = 1 << 24  # 64 MiB of float32
CALIBRATION_NUMEL_CPU = 1 << 14


def _bytes(t: Any) -> Any:
    return t.reshape(-1).view(__import__("torch").uint8) if t.numel() else t


@dataclass
class Filled:
    """An input slot and what the referee put there: the seed, the non-tensor values, pristine copies."""

    slot: Slot
    seed: int = -1
    literals: list[Any] = field(default_factory=list)
    pristine: list[Any] = field(default_factory=list)

    def call(self) -> Call:
        return Call.model_construct(inputs=self.slot.ident, literals=self.literals)  # trusted: not validated


class Feed:
    """Input and output slots of one job, bound to its runner as they are made (`bind`)."""

    def __init__(self, get_inputs: Any, device: str, dtype: str, bind: Any) -> None:
        self.get_inputs, self.device, self.dtype = get_inputs, device, dtype
        self.bind = bind  # (slots) -> None: offers them to the runner
        self.inputs: list[Filled] = []
        self.layout: Layout | None = None  # of the inputs: the problem's, fixed by its sizes
        self.outputs: dict[tuple[Any, ...], list[Slot]] = {}
        self.calibration: Slot | None = None

    def generate(self, seed: int) -> list[Any]:
        import torch

        from kbench.problems.inputs import make_inputs

        return make_inputs(self.get_inputs, seed, torch.device(self.device), self.dtype)

    def _input_slots(self, n: int, values: list[Any]) -> list[Filled]:
        import torch

        from kbench.sandbox.protocol import dtype_name

        specs = [(dtype_name(v.dtype), list(v.shape)) for v in values if isinstance(v, torch.Tensor)]
        layout = Layout.of(specs)
        if self.layout is not None and layout.key() != self.layout.key():
            raise RuntimeError("the problem's inputs changed shape between seeds")
        self.layout = layout
        self._more_inputs(n)
        return self.inputs[:n]

    def _more_inputs(self, n: int) -> None:
        if self.layout is None or len(self.inputs) >= n:
            return
        made = [allocate(next(_ids), self.layout, self.device) for _ in range(n - len(self.inputs))]
        self._offer(made)
        self.inputs += [Filled(slot) for slot in made]

    def _offer(self, made: list[Slot]) -> None:
        """Bind `made` to the runner in as few commands as its channel carries (MAX_FDS descriptors each)."""
        chunk: list[Slot] = []
        fds = 0
        for slot in made:
            if chunk and fds + len(slot.fds()) > MAX_FDS:
                self.bind(chunk)
                chunk, fds = [], 0
            chunk.append(slot)
            fds += len(slot.fds())
        if chunk:
            self.bind(chunk)

    def reserve(self, n: int, metas: list[OutputMeta]) -> None:
        """Input and output slots for batches of `n` calls (`metas`: one call's outputs), bound now: the
        runner's work of binding them falls before the batches, not among them; the calibration's slot too
        (the empty batches after the loop use it)."""
        self._more_inputs(n)
        self.output_slots(metas, n)
        self.calibration_slot()

    def fill(self, index: int, seed: int) -> Filled:
        """Input slot `index` with the inputs of `seed` (made now), and their pristine copies."""
        import torch

        values = self.generate(seed)
        filled = self._input_slots(index + 1, values)[index]
        tensors = [v for v in values if isinstance(v, torch.Tensor)]
        for dst, src in zip(filled.slot.tensors, tensors, strict=True):
            dst.copy_(src)
        filled.seed = seed
        filled.literals = [None if isinstance(v, torch.Tensor) else v for v in values]
        filled.pristine = [t.clone() for t in tensors]
        return filled

    def ready(self) -> None:
        """Before a command: everything the referee queued on the device is done (the runner reads it)."""
        if self.device.startswith("cuda"):
            import torch

            torch.cuda.synchronize(self.device)

    def check_unchanged(self, filled: Filled, what: str) -> None:
        """`cheat inputs-mutated` when the call changed any byte of its inputs."""
        import torch

        for i, (now, before) in enumerate(zip(filled.slot.tensors, filled.pristine, strict=True)):
            if not torch.equal(_bytes(now), _bytes(before)):
                raise Stop(Status.CHEAT, f"{what} modified its input {i}", "inputs-mutated")

    def calibration_slot(self) -> Slot:
        """An output slot of its own for the timing loop's calibration batches (referee/calibrate.py)."""
        if self.calibration is None:
            numel = CALIBRATION_NUMEL_CUDA if self.device.startswith("cuda") else CALIBRATION_NUMEL_CPU
            self.calibration = allocate(next(_ids), Layout.of([("float32", [numel])]), self.device)
            fill_nan(self.calibration)
            self.bind([self.calibration])
        return self.calibration

    def output_slots(self, metas: list[OutputMeta], n: int) -> list[Slot]:
        """`n` output slots shaped like `metas` (one call's outputs as the runner reported them)."""
        layout = Layout.of([(m.dtype, m.shape) for m in metas])
        pool = self.outputs.setdefault(layout.key(), [])
        made = [allocate(next(_ids), layout, self.device) for _ in range(n - len(pool))]
        for slot in made:
            fill_nan(slot)
        self._offer(made)
        pool += made
        return pool[:n]

    def close(self) -> None:
        for filled in self.inputs:
            filled.slot.close()
        for pool in self.outputs.values():
            for slot in pool:
                slot.close()
        self.inputs.clear()
        self.outputs.clear()


def fill_nan(slot: Slot) -> None:
    """Every byte 0xFF: NaN in every floating-point format, so an output never written fails."""
    for t in slot.tensors:
        if t.numel():
            _bytes(t).fill_(0xFF)


MAX_OUTPUT_BYTES = 1 << 40  # an output the runner claims beyond this is no output a problem has


def plain(metas: list[OutputMeta], what: str) -> None:
    """`cheat tensor-subclass` unless every output is a plain torch.Tensor; `output-aliases-input` when
    one shares its storage with an input (as the runner saw it); `cheat protocol` for a description no
    tensor has (the runner's answers are untrusted data)."""
    import torch

    for i, meta in enumerate(metas):
        if meta.type == "Tensor":
            dtype = getattr(torch, meta.dtype, None) if meta.dtype.isidentifier() else None
            count = 1
            for n in meta.shape:
                count *= max(n, 0)
            if (
                not isinstance(dtype, torch.dtype)
                or any(n < 0 for n in meta.shape)
                or count > MAX_OUTPUT_BYTES
            ):
                raise Stop(Status.CHEAT, f"{what}'s output {i} was described as no tensor is", "protocol")
        if meta.type != "Tensor":
            raise Stop(
                Status.CHEAT, f"{what}'s output {i} is a {meta.type}, not torch.Tensor", "tensor-subclass"
            )
        if meta.aliases >= 0:
            raise Stop(
                Status.CHEAT,
                f"{what}'s output {i} shares storage with input {meta.aliases}",
                "output-aliases-input",
            )


def memory_cap(feed: Feed, layout: list[OutputMeta]) -> int:
    """How many calls' inputs and outputs (and pristine copies) fit a quarter of the free memory."""
    import torch

    per_call = (
        2 * (feed.layout.nbytes if feed.layout else 0)
        + 2 * Layout.of([(m.dtype, m.shape) for m in layout]).nbytes
    )
    if feed.device.startswith("cuda"):
        free = torch.cuda.mem_get_info(feed.device)[0]
    else:
        import os

        free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return max(1, int(free // 4 // max(per_call, 1)))
