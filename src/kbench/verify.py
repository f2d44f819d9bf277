"""`kbench verify`: build and run each reference problem, time it, measure its memory, and lint it.

The timer here is deliberately simple (warm-up, then the median of repeats with a device sync): it is for
sizing problems, not for judging candidates (the referee, referee/timing.py, does that).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from kbench.errors import ConfigError, ProblemError
from kbench.problems.lint import LintContext, flat_tensors, run_rules
from kbench.problems.loader import LoadedProblem, build_model, load
from kbench.types import Finding, Problem, Severity

SEEDS = (0, 1)  # seed 0 = the inputs every rule uses; seed 1 = the "other inputs" for seed/input rules


@dataclass(frozen=True)
class VerifyResult:
    problem_key: str
    name: str
    preset: str
    device: str
    eager_ms: float | None = None
    peak_bytes: int | None = None
    memory_method: str = ""  # cuda-max-allocated | estimate (inputs+params+outputs)
    full_peak_bytes: int | None = None
    full_peak_method: str = ""
    findings: tuple[Finding, ...] = ()
    seconds: float = 0.0

    @property
    def broken(self) -> bool:
        """The reference itself does not run: a failure with or without --strict."""
        return any(f.severity is Severity.REJECT for f in self.findings)

    def passed(self, strict: bool) -> bool:
        return not self.broken and not (strict and self.findings)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["findings"] = [
            {"rule": f.rule, "severity": f.severity.value, "message": f.message} for f in self.findings
        ]
        return data


def checked_device(device: str) -> str:
    """`auto` -> cuda when available, else cpu; an explicit cuda device without CUDA is our error."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"--device {device}: this torch build sees no CUDA GPU; use --device cpu")
    if device != "cpu" and not device.startswith("cuda"):
        raise ConfigError(f"--device {device}: expected auto, cpu, cuda or cuda:N")
    return device


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def time_eager(fn: Callable[[], Any], device: str, budget_s: float = 0.5, max_repeats: int = 20) -> float:
    """Median wall time (ms) of `fn` after 2 warm-ups; at least 3 repeats, stopping at `budget_s`."""
    for _ in range(2):
        fn()
    _sync(device)
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < 3 or (len(times) < max_repeats and time.perf_counter() - start < budget_s):
        t0 = time.perf_counter()
        fn()
        _sync(device)
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def tensor_bytes(values: Iterable[Any]) -> int:
    return sum(t.numel() * t.element_size() for t in flat_tensors(list(values)))


def model_bytes(model: Any) -> int:
    return tensor_bytes(list(model.parameters()) + list(model.buffers()))


def estimate_peak(problem: Problem, preset: str) -> tuple[int, str]:
    """Peak bytes of a preset without allocating: build and run it on the meta device.

    Counts parameters, buffers, inputs and outputs (intermediates not included, so a lower bound); when an
    operator has no meta kernel, outputs are left out and the method says so.
    """
    import torch

    loaded = load(problem, preset)
    with torch.device("meta"):
        model = build_model(loaded)
        torch.manual_seed(0)
        inputs = loaded.get_inputs()
        base = model_bytes(model) + tensor_bytes(inputs)
        try:
            with torch.no_grad():  # a training problem's step turns gradients on for itself
                out = loaded.judged(model)(*inputs)
        except (RuntimeError, NotImplementedError, TypeError, ValueError) as exc:
            return base, f"estimate (params+inputs; meta forward failed: {type(exc).__name__})"
    return base + tensor_bytes([out]), "estimate (params+inputs+outputs)"


def _forward_fn(model: Any, device: str) -> Callable[[list[Any]], list[Any]]:
    import torch

    def forward(inputs: list[Any]) -> list[Any]:
        args = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]  # references may mutate
        with torch.no_grad():
            out = flat_tensors(model(*args))
        _sync(device)
        return out

    return forward


def _run_reference(loaded: LoadedProblem, device: str) -> tuple[LintContext, float, int, str]:
    import torch

    from kbench.problems.inputs import seeded_inputs  # imports torch, which `kbench` starts without

    cuda = device.startswith("cuda")
    if cuda:
        torch.cuda.empty_cache()
    model = build_model(loaded).to(device)
    call = loaded.judged(model)  # a training problem's step: forward and backward
    inputs = seeded_inputs(loaded, SEEDS[0], device)
    if cuda:
        # What the problem itself needs: parameters, inputs and one plain forward (its output included),
        # before verify's own copies (the alternative seed's inputs, defensive clones) exist. The count
        # starts once the inputs exist: temporaries of their generation on the GPU are not the problem's.
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        with torch.no_grad():
            call(*inputs)
        torch.cuda.synchronize(device)
        peak, method = int(torch.cuda.max_memory_allocated(device)), "cuda-max-allocated"
    alt = seeded_inputs(loaded, SEEDS[1], device)
    forward = _forward_fn(call, device)
    outputs = forward(inputs)
    with torch.no_grad():
        budget = 2.0 if cuda else 0.3
        eager_ms = time_eager(lambda: call(*inputs), device, budget_s=budget, max_repeats=50 if cuda else 10)
    if not cuda:
        peak = model_bytes(model) + tensor_bytes(inputs) + tensor_bytes(outputs)
        method = "estimate (inputs+params+outputs)"
    ctx = LintContext(loaded, model, device, forward, inputs, alt, outputs, eager_ms=eager_ms)
    return ctx, eager_ms, peak, method


def verify_problem(problem: Problem, preset: str = "small", device: str = "cpu") -> VerifyResult:
    """Build, run, time and lint one problem. A reference that fails to run is a REJECT finding."""
    t0 = time.perf_counter()
    base = {"problem_key": problem.key, "name": problem.name, "preset": preset, "device": device}
    try:
        loaded = load(problem, preset)
        ctx, eager_ms, peak, method = _run_reference(loaded, device)
    except ProblemError as exc:
        return VerifyResult(**base, findings=(Finding("runs", Severity.REJECT, str(exc)),))  # type: ignore[arg-type]
    except Exception as exc:  # the reference's own failure is data for the report, never a crash of verify
        msg = f"reference failed: {type(exc).__name__}: {exc}"
        return VerifyResult(**base, findings=(Finding("runs", Severity.REJECT, msg),))  # type: ignore[arg-type]
    if preset == "full" and device.startswith("cuda"):
        ctx.full_peak_bytes, ctx.full_peak_method = peak, method
    else:
        ctx.full_peak_bytes, ctx.full_peak_method = estimate_peak(problem, "full")
    findings = run_rules(ctx)
    return VerifyResult(
        **base,  # type: ignore[arg-type]
        eager_ms=eager_ms,
        peak_bytes=peak,
        memory_method=method,
        full_peak_bytes=ctx.full_peak_bytes,
        full_peak_method=ctx.full_peak_method,
        findings=tuple(findings),
        seconds=time.perf_counter() - t0,
    )


@dataclass
class VerifyRun:
    results: list[VerifyResult] = field(default_factory=list)

    def failures(self, strict: bool) -> list[VerifyResult]:
        return [r for r in self.results if not r.passed(strict)]


def verify_problems(
    problems: list[Problem],
    preset: str = "small",
    device: str = "auto",
    on_result: Callable[[VerifyResult], None] | None = None,
) -> VerifyRun:
    device = checked_device(device)
    run = VerifyRun()
    for problem in problems:
        result = verify_problem(problem, preset, device)
        run.results.append(result)
        if on_result is not None:
            on_result(result)
    return run
