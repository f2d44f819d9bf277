"""The work behind each MCP tool, on two Evaluators of one server: `practice` (evaluate and profile: not
recorded, no hidden shapes) and `final` (submit: recorded in the server's run, the whole protocol).

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
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from kbench.api import Evaluator, EvaluatorOptions, Submission
from kbench.config import RunConfig
from kbench.errors import KbenchError
from kbench.mcp.public import build_view, findings, own_kernels, problem_row, scrub, verdict_view
from kbench.mcp.reference import Profiles, fusion, sol_ms
from kbench.types import Candidate, Problem, Verdict


class ToolRefusal(Exception):
    """A tool's answer is an error: its message is what the agent reads (no path, no traceback)."""


@dataclass(frozen=True)
class Budget:
    """Tool calls, evaluation calls (check, evaluate, profile) and seconds spent in them (GPU seconds on a
    GPU machine), a desk answers before refusing (None: no limit)."""

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
                    f"the evaluation budget of this session is spent ({b.max_evals} check/evaluate/profile "
                    "calls); submit a final answer, or stop"
                )
            if evaluation and b.max_device_s is not None and self.device_s >= b.max_device_s:
                raise ToolRefusal(
                    f"the evaluation time of this session is spent ({self.device_s:.0f} of "
                    f"{b.max_device_s:g} s in check/evaluate/profile); submit a final answer, or stop"
                )
            self.calls += 1
            self.evals += evaluation

    def spent(self, seconds: float) -> None:
        with self._lock:
            self.device_s += seconds

    @contextmanager
    def charging(self) -> Iterator[None]:
        """Count the block's seconds as evaluation time, whether it answers or fails: they were spent."""
        start = time.monotonic()
        try:
            yield
        finally:
            self.spent(time.monotonic() - start)

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
        self.profiles = Profiles()  # shared by every seat: one profiler per process

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
        with self.counter.charging():
            build = await asyncio.to_thread(prebuild, candidate, self.cfg, device)
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
        submission = Submission(p, source, self._backend(backend))
        with self.counter.charging():
            verdict = await self._judge(self.practice, submission)
        return verdict_view(verdict, await self._sol(p, verdict)) | self.counter.left()

    async def profile(self, address: str, source: str, backend: str | None) -> dict[str, Any]:
        """evaluate's practice verdict (the same Evaluator, the same view), with what a profile shows: the
        candidate's own kernels that ran and their share of its time, the problem's roofline and the
        fraction of its speed-of-light reached, and the reference's eager forward kernel by kernel. The
        reference's profile is the problem's (public code), made on the device the verdict ran on; it is
        counted in the evaluation time with the candidate's run (on a GPU it is GPU time)."""
        self.counter.spend(evaluation=True)
        p = self.problem(address)
        submission = Submission(p, source, self._backend(backend))
        with self.counter.charging():
            verdict = await self._judge(self.practice, submission)
            analysis = await asyncio.to_thread(
                self.profiles.reference, p, verdict.preset, verdict.dtype, verdict.device
            )
        view = verdict_view(verdict, await self._sol(p, verdict))
        return view | {"own_kernels": own_kernels(verdict)} | analysis | self.counter.left()

    async def submit(self, address: str, source: str, backend: str | None) -> dict[str, Any]:
        self.counter.spend(evaluation=False, final=True)
        p = self.problem(address)
        submitted = self.desk.submitted
        task = submitted.get(p.key)
        if task is not None:
            first = await asyncio.shield(task)
            return first | {"note": "this problem was already submitted in this session: its first verdict"}
        submission = Submission(p, source, self._backend(backend), sample=self.desk.sample, model=self.model)
        task = asyncio.ensure_future(self._final(p, submission))
        submitted[p.key] = task
        try:
            return await asyncio.shield(task)
        except Exception:
            del submitted[p.key]  # kbench's refusal or failure is not a verdict: the agent may submit again
            raise

    async def inspect(self, address: str) -> dict[str, Any]:
        self.counter.spend(evaluation=False)
        p = self.problem(address)
        return await asyncio.to_thread(fusion, p, self.cfg)

    # internals ---------------------------------------------------------------------------------------

    def _backend(self, backend: str | None) -> str:
        from kbench.backends import get_backend

        name = backend or self.cfg.backend
        try:
            get_backend(name)
        except KbenchError as exc:
            raise ToolRefusal(scrub(str(exc))) from None
        return name

    async def _final(self, p: Problem, submission: Submission) -> dict[str, Any]:
        verdict = await self._judge(self.final, submission)
        return verdict_view(verdict, await self._sol(p, verdict)) | {"run": self.run_id}

    async def _sol(self, p: Problem, verdict: Verdict) -> float | None:
        return await asyncio.to_thread(sol_ms, p, verdict.preset, verdict.dtype, verdict.device, self.cfg)

    @staticmethod
    async def _judge(evaluator: Evaluator, submission: Submission) -> Verdict:
        try:
            ticket = await asyncio.to_thread(evaluator.submit, submission)
            return await asyncio.wrap_future(ticket.future)
        except KbenchError as exc:
            raise ToolRefusal(scrub(str(exc))) from None


def _to_tools(text: str) -> str:
    """A message that points at `kbench list` or `GET problems`, pointing at the list_problems tool."""
    text = re.sub(r"`kbench list --level (\d+)`", r"list_problems(level=\1)", text)
    return re.sub(r"`kbench list[^`]*`|GET problems", "list_problems", text)
