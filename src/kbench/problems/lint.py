"""Lint rules for reference problems: a reference that a kernel can fake is a broken benchmark.

Each rule looks at one built-and-run problem (a `LintContext`) and returns the reasons it fails; `kbench
verify` turns those into warnings (failures under --strict). The rules, and the cheat each one prevents:

- finite: NaN/inf outputs make every candidate "correct" under NaN-aware comparison.
- varies-with-seed: an output that is the same for any input can be hard-coded.
- uses-every-input / uses-every-parameter: a kernel may skip work the output does not depend on.
- deterministic: a nondeterministic reference makes correctness checks flaky.
- gradients: a training problem whose gradient is zero everywhere accepts a backward that does nothing.
- known-tags, presets, size rules: the suite stays filterable, CPU-testable and runnable on 24 GB cards.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kbench.problems.loader import LoadedProblem, load
from kbench.problems.tags import unknown_tags
from kbench.types import Finding, Severity

GIB = 2**30
MAX_FULL_BYTES = 8 * GIB  # 24 GB consumer cards must run every `full` preset, with room for the candidate
MIN_FULL_EAGER_MS = 1.0  # below ~1 ms launch overhead, not the kernel, dominates the measured time
# Relative change that counts as "the output changed": 1e-5 of the output's scale is ~100x fp32 rounding
# noise, so a parameter whose effect is cancelled (conv bias before training-mode BatchNorm) is caught.
CHANGE_RTOL = 1e-5
# Repeat forwards may differ by float rounding when atomics add in another order (scatter_add, index_add
# on a GPU): up to 1e-6 of the output's scale is that, 100x under the fp32 correctness tolerance.
NONDETERMINISM_RTOL = 1e-6


@dataclass
class LintContext:
    """Everything the rules look at. `forward(inputs)` runs the model and returns its flat tensor outputs."""

    loaded: LoadedProblem
    model: Any
    device: str
    forward: Callable[[list[Any]], list[Any]]
    inputs: list[Any]  # seed 0, on device
    alt_inputs: list[Any]  # seed 1, on device
    outputs: list[Any]
    eager_ms: float | None = None
    full_peak_bytes: int | None = None  # measured or estimated peak of the `full` preset
    full_peak_method: str = ""
    notes: list[str] = field(default_factory=list)


Rule = Callable[[LintContext], list[str]]
RULES: dict[str, Rule] = {}


def lint_rule(name: str) -> Callable[[Rule], Rule]:
    def deco(fn: Rule) -> Rule:
        RULES[name] = fn
        return fn

    return deco


def run_rules(ctx: LintContext, names: list[str] | None = None) -> list[Finding]:
    findings: list[Finding] = []
    for name in names or list(RULES):
        try:
            reasons = RULES[name](ctx)
        except Exception as exc:  # the reference broke under the rule's probe: that is a finding too
            reasons = [f"the check itself failed: {type(exc).__name__}: {exc}"]
        findings.extend(Finding(rule=name, severity=Severity.WARN, message=r) for r in reasons)
    return findings


def flat_tensors(value: Any) -> list[Any]:
    """The tensors of a forward's result, in order (a tensor, or nested tuples/lists/dicts of them)."""
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, list | tuple):
        return [t for v in value for t in flat_tensors(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in flat_tensors(v)]
    return []


def outputs_differ(a: list[Any], b: list[Any]) -> bool:
    """True when any output tensor changed by more than CHANGE_RTOL of its scale (exactly, for integers)."""
    import torch

    if len(a) != len(b):
        return True
    for x, y in zip(a, b, strict=True):
        if x.shape != y.shape or x.dtype != y.dtype:
            return True
        if not (x.is_floating_point() or x.is_complex()):
            if not torch.equal(x, y):
                return True
            continue
        if x.numel() == 0:
            continue
        diff = (x.double() - y.double()).abs()
        scale = max(float(x.double().abs().max()), 1e-30)
        if bool(torch.isnan(diff).any()) or float(diff.max()) > CHANGE_RTOL * scale:
            return True
    return False


@lint_rule("finite")
def _finite(ctx: LintContext) -> list[str]:
    import torch

    bad = [
        i for i, t in enumerate(ctx.outputs) if t.is_floating_point() and not bool(torch.isfinite(t).all())
    ]
    return [f"output {i} has NaN or inf values" for i in bad]


@lint_rule("varies-with-seed")
def _varies(ctx: LintContext) -> list[str]:
    if outputs_differ(ctx.outputs, ctx.forward(ctx.alt_inputs)):
        return []
    return ["inputs from seeds 0 and 1 give the same output: a kernel could return a constant"]


@lint_rule("uses-every-input")
def _uses_inputs(ctx: LintContext) -> list[str]:
    import torch

    reasons = []
    for i, (x, alt) in enumerate(zip(ctx.inputs, ctx.alt_inputs, strict=True)):
        if not isinstance(x, torch.Tensor):
            continue
        swapped = alt
        if torch.equal(x, alt):  # a deterministic input (arange, ones): perturb it instead, if it is float
            if not x.is_floating_point():
                continue
            swapped = x + torch.randn_like(x) * (float(x.abs().mean()) or 1.0)
        trial = [*ctx.inputs[:i], swapped, *ctx.inputs[i + 1 :]]
        if not outputs_differ(ctx.outputs, ctx.forward(trial)):
            reasons.append(f"changing input {i} {tuple(x.shape)} does not change the output")
    return reasons


@lint_rule("uses-every-parameter")
def _uses_parameters(ctx: LintContext) -> list[str]:
    import torch

    reasons = []
    gen = torch.Generator(device=ctx.device).manual_seed(7)
    with torch.no_grad():
        for name, p in ctx.model.named_parameters():
            saved = p.detach().clone()
            scale = float(saved.abs().mean()) if saved.numel() else 0.0
            noise = torch.randn(p.shape, generator=gen, device=p.device, dtype=p.dtype)
            p.add_(noise * (scale or 1.0))
            changed = outputs_differ(ctx.outputs, ctx.forward(ctx.inputs))
            p.copy_(saved)
            if not changed:
                reasons.append(f"perturbing parameter '{name}' {tuple(p.shape)} does not change the output")
    return reasons


@lint_rule("deterministic")
def _deterministic(ctx: LintContext) -> list[str]:
    again = ctx.forward(ctx.inputs)
    if len(again) != len(ctx.outputs) or any(
        a.shape != b.shape for a, b in zip(again, ctx.outputs, strict=True)
    ):
        return ["running forward twice on the same inputs gives outputs of different shapes"]
    worst = max((_rounding_diff(a, b) for a, b in zip(again, ctx.outputs, strict=True)), default=0.0)
    if worst <= NONDETERMINISM_RTOL:
        return []  # bitwise equal, or float atomics summing in another order (scatter_add, index_add)
    return [
        f"running forward twice on the same inputs gives outputs {worst:.2g} apart (relative to max |output|)"
    ]


@lint_rule("gradients")
def _gradients(ctx: LintContext) -> list[str]:
    training = ctx.loaded.training
    if training is None:
        return []
    from kbench.problems.training import output_names, trainable

    forward_count = len(ctx.outputs) - len(training.grad_inputs) - len(trainable(ctx.model))
    names = output_names(training, ctx.model, forward_count)[forward_count:]
    return [
        f"the {name} is zero everywhere: a backward that does nothing would pass"
        for name, t in zip(names, ctx.outputs[forward_count:], strict=True)
        if t.is_floating_point() and t.numel() and not bool(t.ne(0).any())
    ]


def _rounding_diff(a: Any, b: Any) -> float:
    """max |a - b| / max |b| (0 for equal tensors; inf where NaNs or ints differ)."""
    import torch

    if torch.equal(a, b):
        return 0.0
    if not a.is_floating_point() or bool(torch.isnan(a).ne(torch.isnan(b)).any()):
        return float("inf")
    diff = (a.double() - b.double()).nan_to_num(0.0).abs().max()
    return float(diff) / max(float(b.double().nan_to_num(0.0).abs().max()), 1e-30)


@lint_rule("known-tags")
def _known_tags(ctx: LintContext) -> list[str]:
    problem = ctx.loaded.problem
    reasons = [f"unknown tag '{t}' (see kbench/problems/tags.py)" for t in unknown_tags(problem.tags)]
    if problem.source == "kbench" and not problem.tags:
        reasons.append("no KBENCH_TAGS: every embedded problem names its fusion pattern class")
    return reasons


@lint_rule("presets")
def _presets(ctx: LintContext) -> list[str]:
    import torch

    from kbench.problems.loader import build_model

    problem = ctx.loaded.problem
    reasons = []
    if problem.source == "kbench" and "small" not in problem.presets:
        reasons.append("no 'small' preset: CI runs every embedded problem on CPU with it")
    for preset in problem.presets:
        if preset == ctx.loaded.preset:
            continue
        try:  # build model and inputs on the meta device: shapes are checked, nothing is allocated
            loaded = load(problem, preset)
            with torch.device("meta"):
                loaded.judged(build_model(loaded))(*loaded.get_inputs())
        except Exception as exc:  # any failure of the preset is the finding
            reasons.append(f"preset '{preset}' does not build and run: {type(exc).__name__}: {exc}")
    return reasons


@lint_rule("full-size")
def _full_size(ctx: LintContext) -> list[str]:
    reasons = []
    peak = ctx.full_peak_bytes
    if peak is not None and peak > MAX_FULL_BYTES:
        reasons.append(
            f"'full' preset needs {peak / GIB:.1f} GiB ({ctx.full_peak_method}), over the "
            f"{MAX_FULL_BYTES // GIB} GiB limit"
        )
    timed_full = ctx.loaded.preset == "full" and ctx.device.startswith("cuda")
    if timed_full and ctx.eager_ms is not None and ctx.eager_ms < MIN_FULL_EAGER_MS:
        reasons.append(
            f"'full' preset runs in {ctx.eager_ms:.3f} ms eager, under {MIN_FULL_EAGER_MS} ms: "
            "launch overhead would dominate timings"
        )
    return reasons
