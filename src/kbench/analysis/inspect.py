"""`kbench inspect` as a library: eager profile, torch.compile fusions, fusion groups and roofline."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from kbench.analysis.compiled import CompileView, compile_view
from kbench.analysis.gpus import GPUSpec
from kbench.analysis.graph import GraphView, trace_groups
from kbench.analysis.profile import EagerProfile, profile_eager
from kbench.analysis.roofline import SOL, FlopCount, problem_flops, sol_from_counts
from kbench.problems.format import parse_problem
from kbench.problems.inputs import seeded_inputs
from kbench.problems.loader import build_model, load
from kbench.types import Problem


@dataclass
class InspectReport:
    problem_key: str
    name: str
    preset: str
    device: str
    counts: FlopCount
    sol: SOL
    graph: GraphView
    eager: EagerProfile | None = None
    compiled: CompileView | None = None
    eager_ms: float | None = None  # profiled forward time (sum of self times), for "within 2x of SOL"
    forward_sol: SOL | None = None  # a training problem's forward alone (`sol` is its whole step's)

    def to_dict(self) -> dict[str, Any]:
        return {
            "problem_key": self.problem_key,
            "name": self.name,
            "preset": self.preset,
            "device": self.device,
            "flops": self.counts.flops,
            "flops_by_op": dict(self.counts.by_op),
            "sol": asdict(self.sol),
            "forward_sol": asdict(self.forward_sol) if self.forward_sol is not None else None,
            "graph": self.graph.to_dict(),
            "eager": self.eager.to_dict() if self.eager else None,
            "compiled": self.compiled.to_dict() if self.compiled else None,
            "eager_ms": self.eager_ms,
        }


def _graph_view(problem: Problem, preset: str) -> GraphView:
    """Fusion groups traced on the meta device: shapes and bytes of any preset at no memory cost."""
    import torch

    loaded = load(problem, preset)
    with torch.device("meta"):
        model = build_model(loaded)
        torch.manual_seed(0)
        return trace_groups(model, _forward_inputs(loaded, loaded.get_inputs()))


def _forward_inputs(loaded: Any, inputs: list[Any]) -> list[Any]:
    """The forward's inputs: a training problem's without its upstream gradients."""
    cut = len(inputs) - (loaded.training.upstream if loaded.training is not None else 0)
    return inputs[:cut]


def inspect_problem(
    problem: Problem,
    gpu: GPUSpec,
    preset: str = "small",
    device: str = "cpu",
    dtype: str = "fp32",
    compile: bool = True,
    profile: bool = True,
) -> InspectReport:
    """Everything `kbench inspect` shows for one problem. SOL is computed for `gpu` whatever `device` is."""
    counts = problem_flops(problem, preset, dtype)
    report = InspectReport(
        problem_key=problem.key,
        name=problem.name,
        preset=preset,
        device=device,
        counts=counts,
        sol=sol_from_counts(counts, gpu, dtype),
        graph=_graph_view(problem, preset),
    )
    if parse_problem(problem.code, problem.path or problem.key).training is not None:
        report.forward_sol = sol_from_counts(
            problem_flops(problem, preset, dtype, forward_only=True), gpu, dtype
        )
    if profile or compile:
        loaded = load(problem, preset)
        model = build_model(loaded).to(device)
        inputs = seeded_inputs(loaded, 0, device)
        if profile:  # a training problem's step: its forward's and its backward's kernels
            report.eager = profile_eager(loaded.judged(model), inputs, device)
            source = report.eager.kernels if device.startswith("cuda") else report.eager.ops
            report.eager_ms = sum(r.time_ms for r in source)
        if compile:  # torch.compile's fusions of the forward
            report.compiled = compile_view(model, _forward_inputs(loaded, inputs), device)
    return report
