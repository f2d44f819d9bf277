"""The trivial answers the sweep judges (problems/trivial.py), each computed from one seed's reference
outputs and inputs: a registry (`ANSWERS`) of what a candidate that does no real work could return. The
module docstring of problems/trivial.py says what each answer is and why it is there."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kbench.problems.inputs import TORCH_DTYPES, flatten_outputs, make_inputs
from kbench.problems.loader import LoadedProblem, build_model

LOW_PRECISION = ("fp16", "bf16")
BACKWARD = ("zero-gradients", "forward-as-gradient")  # training problems only
CALIBRATION_SEED = 0  # not an evaluator seed (those start at config.FIXED_SEED_BASE = 1000)
RANDOM_SEED = 7  # the `random` answer's noise: fixed, so a sweep's report is reproducible


@dataclass(frozen=True)
class OutputStats:
    """What a candidate could know of an output without computing it: its values for other inputs."""

    mean: float
    std: float
    low: float
    high: float


@dataclass
class SeedCase:
    """One seed's reference outputs, and what the answers need to compute themselves."""

    loaded: LoadedProblem
    seed: int
    device: Any  # torch.device
    init_seed: int
    first_input: Any  # a copy of the first tensor input, taken before the forward (None: no tensor)
    outputs: list[Any]
    stale: list[Any]  # the calibration seed's outputs
    calibration: list[OutputStats]
    gradients: int = 0  # of `outputs`, the last ones that are a training step's gradients


Answer = Callable[[SeedCase], list[Any]]
ANSWERS: dict[str, Answer] = {}


def answer(name: str) -> Callable[[Answer], Answer]:
    def deco(fn: Answer) -> Answer:
        ANSWERS[name] = fn
        return fn

    return deco


def applicable(name: str, dtype: str, training: bool = False) -> bool:
    """Whether answer `name` is a trivial answer when evaluating in `dtype` (a training problem or not)."""
    if name in BACKWARD:
        return training
    return name not in LOW_PRECISION or dtype == "fp32"


@answer("zeros")
def _zeros(case: SeedCase) -> list[Any]:
    import torch

    return [torch.zeros_like(r) for r in case.outputs]


@answer("first-input")
def _first_input(case: SeedCase) -> list[Any]:
    return _shaped_like(case.first_input, case.outputs)


def _shaped_like(x: Any, refs: list[Any]) -> list[Any]:
    """`x` as each of `refs`: reshaped when it has as many elements, else its first elements."""
    if x is None:
        return [r.new_zeros(0) for r in refs]  # no tensor input: a shape mismatch, as a candidate's
    out = []
    for r in refs:
        if x.numel() >= r.numel():
            out.append(x.reshape(-1)[: r.numel()].reshape(r.shape).to(r.dtype))
        else:
            out.append(x.to(r.dtype))  # fewer elements than the output: fails on its shape
    return out


def _forward_part(case: SeedCase) -> tuple[list[Any], list[Any]]:
    cut = len(case.outputs) - case.gradients
    return case.outputs[:cut], case.outputs[cut:]


@answer("zero-gradients")
def _zero_gradients(case: SeedCase) -> list[Any]:
    import torch

    forward, grads = _forward_part(case)
    return forward + [torch.zeros_like(g) for g in grads]


@answer("forward-as-gradient")
def _forward_as_gradient(case: SeedCase) -> list[Any]:
    forward, grads = _forward_part(case)
    return forward + _shaped_like(forward[0] if forward else None, grads)


def low_precision_outputs(
    loaded: LoadedProblem, seed: int, device: Any, dtype: str, init_seed: int
) -> list[Any]:
    """The reference computed in `dtype`: built as the reference worker builds it, then cast."""
    import torch

    model = loaded.judged(build_model(loaded, init_seed).to(device).to(TORCH_DTYPES[dtype]))
    inputs = make_inputs(loaded.get_inputs, seed, device, dtype)
    with torch.no_grad():
        return flatten_outputs(model(*inputs))


def _cast_like(values: list[Any], refs: list[Any]) -> list[Any]:
    return [v.to(r.dtype) if hasattr(v, "to") else v for v, r in zip(values, refs, strict=False)] + values[
        len(refs) :
    ]


@answer("fp16")
def _fp16(case: SeedCase) -> list[Any]:
    values = low_precision_outputs(case.loaded, case.seed, case.device, "fp16", case.init_seed)
    return _cast_like(values, case.outputs)


@answer("bf16")
def _bf16(case: SeedCase) -> list[Any]:
    values = low_precision_outputs(case.loaded, case.seed, case.device, "bf16", case.init_seed)
    return _cast_like(values, case.outputs)


@answer("stale")
def _stale(case: SeedCase) -> list[Any]:
    return case.stale


@answer("random")
def _random(case: SeedCase) -> list[Any]:
    import torch

    gen = torch.Generator(device=case.device).manual_seed(RANDOM_SEED + case.seed)
    out = []
    for r, s in zip(case.outputs, case.calibration, strict=True):
        if r.is_floating_point():
            noise = torch.randn(r.shape, generator=gen, device=r.device, dtype=torch.float64)
            out.append((noise * s.std + s.mean).to(r.dtype))
        else:
            low, high = int(s.low), int(s.high)
            values = torch.randint(low, high + 1, r.shape, generator=gen, device=r.device)
            out.append(values.to(r.dtype))
    return out


@answer("constant")
def _constant(case: SeedCase) -> list[Any]:
    import torch

    return [torch.full_like(r, s.mean) for r, s in zip(case.outputs, case.calibration, strict=True)]


def output_stats(r: Any) -> OutputStats:
    """Mean, standard deviation and range of an output's finite values (integers: median for mean)."""
    import torch

    v = r.detach().reshape(-1)
    if not (v.is_floating_point() or v.is_complex()):
        if v.numel() == 0:
            return OutputStats(0.0, 0.0, 0.0, 0.0)
        return OutputStats(float(v.median()), 0.0, float(v.min()), float(v.max()))
    v = v.double()
    v = v[torch.isfinite(v)]
    if v.numel() == 0:
        return OutputStats(0.0, 0.0, 0.0, 0.0)
    std = float(v.std()) if v.numel() > 1 else 0.0
    return OutputStats(float(v.mean()), std, float(v.min()), float(v.max()))
