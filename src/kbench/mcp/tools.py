"""The work behind each MCP tool, on two Evaluators of one server: `practice` (evaluate: not recorded, no
hidden shapes) and `final` (submit: recorded in the server's run, the whole protocol).

A tool's failure (unknown problem, budget spent, a backend this machine cannot run) raises `ToolRefusal`
with one line for the agent; the server turns it into an MCP tool error. Budgets and the one submit per
problem hold for one `Desk`: `kbench mcp` has one for the server's life (one agent per server, as stdio
gives); an agent run (agent/loop.py) seats each session at a desk of its own (`Workbench.seat`), bound to
its problem and sample, on the same two Evaluators.
"""

from __future__ import annotations

import asyncio
import copy
import re
import threading
import time
from dataclasses import dataclass
from typing import Any

from kbench.api import Evaluator, EvaluatorOptions, Submission
from kbench.config import RunConfig
from kbench.errors import KbenchError
from kbench.mcp.public import build_view, findings, problem_row, scrub, verdict_view
from kbench.types import Candidate, Problem


class ToolRefusal(Exception):
    """A tool's answer is an error: its message is what the agent reads (no path, no traceback)."""


@dataclass(frozen=True)
class Budget:
    """Tool calls, check + evaluate calls, and seconds spent in them (GPU seconds on a GPU machine), a
    desk answers before refusing (None: no limit)."""

    max_calls: int | None = None
    max_evals: int | None = None
    max_device_s: float | None = None


class _Counter:
    def __init__(self, budget: Budget) -> None:
        self.budget = budget
        self.calls = 0
        self.evals = 0
        self.device_s = 0.0
        self._lock = threading.Lock()

    def spend(self, evaluation: bool, final: bool = False) -> None:
        """Count one call (and one evaluation); refuse it, counting nothing, when a budget is spent. A
        `final` call (submit) is always taken: the budgets bound the work before the answer, not the answer."""
        with self._lock:
            b = self.budget
            if not final and b.max_calls is not None and self.calls >= b.max_calls:
                raise ToolRefusal(f"the tool-call budget of this session is spent ({b.max_calls} calls)")
            if evaluation and b.max_evals is not None and self.evals >= b.max_evals:
                raise ToolRefusal(
                    f"the evaluation budget of this session is spent ({b.max_evals} check/evaluate calls); "
                    "submit a final answer, or stop"
                )
            if evaluation and b.max_device_s is not None and self.device_s >= b.max_device_s:
                raise ToolRefusal(
                    f"the evaluation time of this session is spent ({self.device_s:.0f} of "
                    f"{b.max_device_s:g} s in check/evaluate); submit a final answer, or stop"
                )
            self.calls += 1
            self.evals += evaluation

    def spent(self, seconds: float) -> None:
        with self._lock:
            self.device_s += seconds

    def left(self) -> dict[str, int | float | None]:
        b = self.budget
        return {
            "calls_left": None if b.max_calls is None else b.max_calls - self.calls,
            "evals_left": None if b.max_evals is None else b.max_evals - self.evals,
            "eval_seconds_left": None if b.max_device_s is None else round(b.max_device_s - self.device_s, 1),
        }


class Desk:
    """One agent's session: its budget counter and the task of each problem's submit; in an agent run,
    also the one problem (its key) and the sample number it works on."""

    def __init__(self, budget: Budget, problem: str | None = None, sample: int | None = None) -> None:
        self.counter = _Counter(budget)
        self.problem = problem
        self.sample = sample
        self.submitted: dict[str, asyncio.Task[dict[str, Any]]] = {}


class Workbench:
    """The tools: the two Evaluators, and the desk of the session they answer (`seat` for another one)."""

    def __init__(self, cfg: RunConfig, budget: Budget, model: str | None = None) -> None:
        self.cfg = cfg
        self.model = model  # the name submits are filed under (default: the config's model, else "api")
        self.desk = Desk(budget)
        practice_cfg = cfg.model_copy(update={"hidden_shapes": False, "run_id": None})
        self.practice = Evaluator(practice_cfg, EvaluatorOptions(record=False, sources_only=True))
        self.final = Evaluator(cfg, EvaluatorOptions(sources_only=True))

    @property
    def counter(self) -> _Counter:
        return self.desk.counter

    def seat(self, desk: Desk) -> Workbench:
        """These tools, on the same Evaluators, for the session at `desk`."""
        view = copy.copy(self)
        view.desk = desk
        return view

    @property
    def run_id(self) -> str | None:
        return self.final.run_id

    def close(self) -> None:
        self.practice.close(cancel=True)
        self.final.close(cancel=True)

    def problem(self, address: str) -> Problem:
        try:
            p = self.final.problem(address, strict=True)
        except KbenchError as exc:  # the problem module's words name the CLI and the service: the tool here
            raise ToolRefusal(_to_tools(scrub(str(exc)))) from None
        bound = self.desk.problem
        if bound is not None and p.key != bound:
            raise ToolRefusal(f"this session works on problem {bound} only (asked: {address})")
        return p

    # tools -------------------------------------------------------------------------------------------

    def list_problems(self, level: int | None, tag: str | None) -> dict[str, Any]:
        from kbench.problems import select

        self.counter.spend(evaluation=False)
        try:
            problems = select(self.cfg.source, level=level, tags=[tag] if tag else None)
        except KbenchError as exc:
            raise ToolRefusal(scrub(str(exc))) from None
        return {
            "source": self.cfg.source,
            "count": len(problems),
            "problems": [problem_row(p) for p in problems],
        }

    def show_problem(self, address: str) -> dict[str, Any]:
        import torch

        from kbench.problems import load

        self.counter.spend(evaluation=False)
        p = self.problem(address)
        loaded = load(p, self.cfg.preset)
        torch.manual_seed(0)
        shapes = [
            f"{tuple(x.shape)} {x.dtype}" if isinstance(x, torch.Tensor) else repr(x)
            for x in loaded.get_inputs()
        ]
        return problem_row(p) | {
            "description": p.description,
            "preset": self.cfg.preset,
            "sizes": loaded.sizes,
            "input_shapes": shapes,
            "tolerance": p.tol(self.cfg.dtype),
            "dtype": self.cfg.dtype,
            "backend": self.cfg.backend,
            "code": p.code,
        }

    async def check(self, address: str, source: str, backend: str | None) -> dict[str, Any]:
        from kbench.checks import run_checks
        from kbench.evaluate.plan import evaluation_device
        from kbench.evaluate.prebuild import prebuild

        self.counter.spend(evaluation=True)
        p = self.problem(address)
        backend = self._backend(backend)
        report = run_checks(source, backend, self.cfg.dtype)
        answer: dict[str, Any] = {"problem": p.key, "backend": backend, "findings": findings(report)}
        if report.rejected:
            return answer | {"ok": False, "message": "rejected by the static checks: nothing was built"}
        candidate = Candidate(p.key, backend, source)
        device = evaluation_device(self.cfg.device, backend)
        start = time.monotonic()
        try:
            build = await asyncio.to_thread(prebuild, candidate, self.cfg, device)
        finally:
            self.counter.spent(time.monotonic() - start)
        answer["build"] = build_view(build)
        answer["ok"] = build.ok
        answer["message"] = "built" if build.ok else "the build failed"
        return answer | self.counter.left()

    async def evaluate(self, address: str, source: str, backend: str | None) -> dict[str, Any]:
        """Correctness and timing against eager on the practice Evaluator. The evaluator always adds its
        per-run secret seed to the fixed ones (evaluate/plan.py make_plan) and cannot run without it, so
        the result is cut down by public.verdict_view: no seed numbers, no reference values, no paths.
        The practice Evaluator's secret seed is its own, never the final one's (each keeps its own
        reference pool), so nothing evaluate shows, even by its status, is about the submit's seed."""
        self.counter.spend(evaluation=True)
        p = self.problem(address)
        start = time.monotonic()
        try:
            verdict = await self._judge(self.practice, Submission(p, source, self._backend(backend)))
        finally:
            self.counter.spent(time.monotonic() - start)
        return verdict_view(verdict) | self.counter.left()

    async def submit(self, address: str, source: str, backend: str | None) -> dict[str, Any]:
        self.counter.spend(evaluation=False, final=True)
        p = self.problem(address)
        submitted = self.desk.submitted
        task = submitted.get(p.key)
        if task is not None:
            first = await asyncio.shield(task)
            return first | {"note": "this problem was already submitted in this session: its first verdict"}
        submission = Submission(p, source, self._backend(backend), sample=self.desk.sample, model=self.model)
        task = asyncio.ensure_future(self._final(submission))
        submitted[p.key] = task
        try:
            return await asyncio.shield(task)
        except Exception:
            del submitted[p.key]  # kbench's refusal or failure is not a verdict: the agent may submit again
            raise

    async def inspect(self, address: str) -> dict[str, Any]:
        self.counter.spend(evaluation=False)
        p = self.problem(address)
        return await asyncio.to_thread(_fusion, p, self.cfg)

    # internals ---------------------------------------------------------------------------------------

    def _backend(self, backend: str | None) -> str:
        from kbench.backends import get_backend

        name = backend or self.cfg.backend
        try:
            get_backend(name)
        except KbenchError as exc:
            raise ToolRefusal(scrub(str(exc))) from None
        return name

    async def _final(self, submission: Submission) -> dict[str, Any]:
        verdict = await self._judge(self.final, submission)
        return verdict_view(verdict) | {"run": self.run_id}

    @staticmethod
    async def _judge(evaluator: Evaluator, submission: Submission) -> Any:
        try:
            ticket = await asyncio.to_thread(evaluator.submit, submission)
            return await asyncio.wrap_future(ticket.future)
        except KbenchError as exc:
            raise ToolRefusal(scrub(str(exc))) from None


def _to_tools(text: str) -> str:
    """A message that points at `kbench list` or `GET problems`, pointing at the list_problems tool."""
    text = re.sub(r"`kbench list --level (\d+)`", r"list_problems(level=\1)", text)
    return re.sub(r"`kbench list[^`]*`|GET problems", "list_problems", text)


def _fusion(p: Problem, cfg: RunConfig) -> dict[str, Any]:
    """The fusion groups of the problem's graph and its speed-of-light, on the CPU: no profile, no
    torch.compile (~15 s cold), no GPU. SOL is the detected GPU's, else an H100's."""
    from kbench.analysis.gpus import detect_gpu, get_gpu
    from kbench.analysis.inspect import inspect_problem

    gpu = detect_gpu() or get_gpu("H100")
    report = inspect_problem(
        p, gpu, preset=cfg.preset, device="cpu", dtype=cfg.dtype, compile=False, profile=False
    )
    sol = report.sol
    return {
        "problem": p.key,
        "preset": cfg.preset,
        "fusion_groups": [g.to_dict() for g in report.graph.fusion_groups],
        "trace_error": scrub(report.graph.error),
        "roofline": {
            "gpu": sol.gpu,
            "gflop": sol.flops / 1e9,
            "min_bytes": sol.bytes,
            "flop_per_byte": sol.intensity,
            "bound": sol.bound,
            "sol_ms": sol.sol_ms,
        },
        "not_shown": "eager kernel profile and torch.compile fusions: `kbench inspect` on a GPU machine",
    }
