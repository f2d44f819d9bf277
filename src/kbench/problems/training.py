"""Training problems: a forward and its backward, judged as one call (a step).

A training problem is a KernelBench-format file with one more module-level literal:

    KBENCH_TRAINING = {"upstream": 1, "grad_inputs": [0]}

- `upstream`: how many of `get_inputs()`'s last entries are upstream gradients, one per output of the
  forward, each shaped like it (they are not passed to `forward`). 0 when the forward returns a scalar
  loss: its backward starts from 1.
- `grad_inputs`: which of the forward's inputs (their positions) have their gradients compared; floating
  tensors only. Every parameter of the model that requires a gradient has its gradient compared too, in
  `named_parameters()` order: a candidate's `ModelNew` keeps the reference's trainable parameters, in the
  same order and shapes.

Every process that judges a problem calls what `judged(loaded, model)` returns: the model itself for an
inference problem, a `Step` for a training one. A step runs the forward with gradients on and the
backward from the upstream gradients (`torch.autograd.backward` into the inputs' fresh leaves and the
parameters, whose `.grad` is put back as it was: nothing carries over from one call to the next) and returns the forward's outputs, then the inputs' gradients, then the
parameters'. So the outputs compared on the fixed and secret seeds, the timed calls checked after they
ran, the kernel-use profile and the timing loop all see forward and backward together, in the same
processes as before; the reference's torch.compile baselines compile the model, so their backward is
compiled too (AOTAutograd). `forward_only` runs the forward alone (with gradients on, as in training),
for timing the passes apart.

A gradient that shares memory with an input (autograd hands an upstream gradient through unchanged for a
sum or a residual) is returned as a copy, for the reference and the candidate alike: an output may not
alias an input (the runner's rule), and an honest backward may well pass its upstream gradient on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kbench.errors import ProblemError

NAME = "KBENCH_TRAINING"


@dataclass(frozen=True)
class Training:
    upstream: int = 1  # trailing get_inputs() entries that are the upstream gradients
    grad_inputs: tuple[int, ...] = ()  # forward inputs whose gradients are compared


def parse(value: Any, where: str) -> Training:
    """KBENCH_TRAINING's literal as a Training; ProblemError naming the file when malformed."""
    if not isinstance(value, dict):
        raise ProblemError(f"{where}: {NAME} must be a dict with keys 'upstream' and 'grad_inputs'")
    unknown = sorted(set(value) - {"upstream", "grad_inputs"})
    if unknown:
        raise ProblemError(f"{where}: {NAME} has unknown key(s) {', '.join(map(str, unknown))}")
    upstream = value.get("upstream", 1)
    grads = value.get("grad_inputs", [])
    if not isinstance(upstream, int) or isinstance(upstream, bool) or upstream < 0:
        raise ProblemError(f"{where}: {NAME}['upstream'] must be a count (0 for a scalar loss)")
    if not isinstance(grads, list | tuple) or not all(isinstance(i, int) and i >= 0 for i in grads):
        raise ProblemError(f"{where}: {NAME}['grad_inputs'] must be a list of input positions")
    if len(set(grads)) != len(grads):
        raise ProblemError(f"{where}: {NAME}['grad_inputs'] names an input twice")
    return Training(upstream=upstream, grad_inputs=tuple(grads))


def trainable(model: Any) -> list[tuple[str, Any]]:
    """The parameters whose gradients a step returns, in order."""
    return [(name, p) for name, p in model.named_parameters() if p.requires_grad]


def output_names(training: Training, model: Any, forward_outputs: int) -> list[str]:
    """What each of a step's outputs is, for messages: `output 0`, `gradient of input 0`,
    `gradient of parameter weight`."""
    names = [f"output {i}" for i in range(forward_outputs)]
    names += [f"gradient of input {i}" for i in training.grad_inputs]
    return names + [f"gradient of parameter {name}" for name, _ in trainable(model)]


class Step:
    """A training problem's judged call: forward, then backward; outputs then gradients."""

    def __init__(self, model: Any, training: Training, around_backward: Any = None) -> None:
        self.model, self.training = model, training
        self.around_backward = around_backward  # called with True before the backward, False after

    def with_backward_hook(self, hook: Any) -> Step:
        """This step, `hook(True)` called before each backward and `hook(False)` after it."""
        return Step(self.model, self.training, hook)

    def split(self, inputs: tuple[Any, ...]) -> tuple[list[Any], list[Any]]:
        """The forward's inputs and the upstream gradients."""
        cut = len(inputs) - self.training.upstream
        if cut < 0:
            raise RuntimeError(f"a training step needs {self.training.upstream} upstream gradient(s)")
        return list(inputs[:cut]), list(inputs[cut:])

    def forward_only(self, *inputs: Any) -> list[Any]:
        """The forward alone, its graph recorded as a step's is; outputs detached."""
        import torch

        args, _ = self.split(inputs)
        args = self._leaves(args)
        with torch.enable_grad():
            out = self.model(*args)
        return [o.detach() if isinstance(o, torch.Tensor) else o for o in _flat(out)]

    def _leaves(self, args: list[Any]) -> list[Any]:
        import torch

        for i in self.training.grad_inputs:
            x = args[i] if i < len(args) else None
            if not isinstance(x, torch.Tensor) or not x.is_floating_point():
                raise RuntimeError(
                    f"input {i} of a training step must be a floating tensor to have a gradient"
                )
            args[i] = x.detach().requires_grad_()
        return args

    def __call__(self, *inputs: Any) -> list[Any]:
        import torch

        args, upstream = self.split(inputs)
        args = self._leaves(args)
        params = trainable(self.model)
        wrt = [args[i] for i in self.training.grad_inputs] + [p for _, p in params]
        if not wrt:
            raise RuntimeError(
                "a training step with no gradient to compare (no grad_inputs, no trainable parameters)"
            )
        with torch.enable_grad():
            out = _flat(self.model(*args))
            tensors = [o for o in out if isinstance(o, torch.Tensor)]
            if self.training.upstream == 0 and (len(tensors) != 1 or tensors[0].numel() != 1):
                raise RuntimeError("a training step without upstream gradients needs a scalar loss")
            if self.training.upstream and len(tensors) != len(upstream):
                raise RuntimeError(
                    f"the forward returned {len(tensors)} tensor(s) for {len(upstream)} upstream gradient(s)"
                )
            kept = [p.grad for _, p in params]  # the model's own .grad, as it was before the step
            for _, p in params:
                p.grad = None
            if self.around_backward is not None:
                self.around_backward(True)
            try:
                torch.autograd.backward(tensors, grad_tensors=upstream or None, inputs=wrt)
                grads = [t.grad for t in wrt]
            finally:
                if self.around_backward is not None:
                    self.around_backward(False)
                for (_, p), g in zip(params, kept, strict=True):
                    p.grad = g
        names = [f"input {i}" for i in self.training.grad_inputs] + [f"parameter {n}" for n, _ in params]
        for name, g in zip(names, grads, strict=True):
            if g is None:
                raise RuntimeError(f"the backward gave no gradient for {name} (detached, or not used)")
        spans = [_span(x) for x in inputs if isinstance(x, torch.Tensor)]
        result = [o.detach() if isinstance(o, torch.Tensor) else o for o in out]
        return result + [g.clone() if _overlaps(g, spans) else g for g in grads]


def judged(training: Training | None, model: Any) -> Any:
    """What is called to judge a problem: the model, or the step of a training problem."""
    return model if training is None else Step(model, training)


def _flat(out: Any) -> list[Any]:
    return list(out) if isinstance(out, tuple | list) else [out]


def _span(t: Any) -> tuple[int, int]:
    storage = t.untyped_storage()
    return storage.data_ptr(), storage.data_ptr() + storage.nbytes()


def _overlaps(t: Any, spans: list[tuple[int, int]]) -> bool:
    lo, hi = _span(t)
    return hi > lo and any(lo < b and a < hi for a, b in spans)
