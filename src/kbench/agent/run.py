"""An agent run: one session per problem and sample (agent/loop.py), all filed in one stored run.

The run is a `kbench run` like a model's: its configuration is stored and restored by `--resume`, its
problems and every LLM request are recorded, and each session's verdict is filed under (problem, sample,
turn 0, backend, model) — by the trusted evaluator when the agent submitted (the final Evaluator of the
tools' Workbench writes to this run), as `no_code` with the session's ending when it did not. Sessions run
`concurrency` at a time; a resumed run goes on with the sessions that have no ending.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from kbench.agent.loop import Ending, Limits, Seat, Session, tool_specs
from kbench.config import RunConfig
from kbench.errors import ConfigError, KbenchError
from kbench.events import Monitor
from kbench.llm.base import Request
from kbench.llm.client import LLMClient
from kbench.pipeline import RunOutcome, open_model_run
from kbench.store import Store, VerdictKey
from kbench.types import Problem, Status, Verdict

SYSTEM = (
    "You are a GPU kernel engineer. Each task is a PyTorch reference problem: write a faster, correct "
    "replacement of its Model as `class ModelNew(nn.Module)` (same constructor and forward signature) whose "
    "forward runs kernels of your own. Work with the tools: show_problem and inspect to read the problem, "
    "check to compile a candidate, evaluate to test its correctness and speed (a practice verdict, not "
    "recorded), profile to see where its time goes, and submit for your final answer, once. The final "
    "verdict uses inputs you never see, checks that your kernels do the work, and times you against "
    "PyTorch eager and torch.compile."
)


def task_text(problem: Problem, cfg: RunConfig) -> str:
    return (
        f"Problem {problem.key} ({problem.name}). Write ModelNew for the {cfg.backend} backend; it is judged "
        f"on {cfg.device} at preset {cfg.preset} in {cfg.dtype}. Pass problem={problem.key!r} to every tool. "
        f"The reference:\n\n```python\n{problem.code}\n```"
    )


@dataclass(frozen=True)
class SessionKey:
    problem: Problem
    sample: int


def run_agent(
    cfg: RunConfig, problems: Sequence[Problem], resume: str | None = None, monitor: Monitor | None = None
) -> RunOutcome:
    """`cfg.samples` agent sessions per problem into a stored run (the LLM client is built first: a
    misconfigured model raises before the run exists, and a new run that recorded nothing is removed)."""
    from kbench.errors import require
    from kbench.generate import make_client

    require("mcp", "mcp")
    monitor = monitor or Monitor()
    client = make_client(cfg, cache=False)
    if not client.uses_tools:
        raise ConfigError(
            f"--agent needs a model that calls tools: openai/MODEL (any compatible server) or "
            f"anthropic/MODEL, not {cfg.model.split('/')[0]}/"
        )
    monitor.activity.client = client
    with open_model_run(cfg, problems, resume) as (store, run_id):
        return asyncio.run(_sessions(cfg, problems, store, run_id, client, monitor))


async def _sessions(
    cfg: RunConfig,
    problems: Sequence[Problem],
    store: Store,
    run_id: str,
    client: LLMClient,
    monitor: Monitor,
) -> RunOutcome:
    from kbench.generate import gen_params
    from kbench.mcp.server import build_server
    from kbench.mcp.tools import Budget, Desk, Workbench

    keys = [SessionKey(p, s) for p in problems for s in range(cfg.samples)]
    ended = {(t.problem_key, t.sample) for t in store.transcript(run_id) if t.role == "end"}
    monitor.started(run_id, len(keys), sum((k.problem.key, k.sample) in ended for k in keys))
    budget = Budget(cfg.agent_max_calls, cfg.agent_max_evals, cfg.agent_max_device_s)
    limits = Limits(cfg.agent_max_tokens, cfg.agent_max_wall_s, cfg.agent_max_calls)
    bench = Workbench(cfg.model_copy(update={"run_id": run_id}), Budget(), model=cfg.model)
    tools = await tool_specs(build_server(bench))
    gate = asyncio.Semaphore(max(1, cfg.concurrency))
    failures: list[str] = []
    recorded = 0

    async def one(key: SessionKey) -> None:
        nonlocal recorded
        if (key.problem.key, key.sample) in ended:
            return
        async with gate:
            desk = Desk(budget, key.problem.key, key.sample)
            request = Request(cfg.model, SYSTEM, (), gen_params(cfg), key.problem.key,
                              key.problem.level, key.problem.number, key.sample)  # fmt: skip
            seat = Seat(key.problem, key.sample, desk, build_server(bench.seat(desk)), store, run_id, request)
            session = Session(seat, client, limits, tools)
            ending = await session.run(task_text(key.problem, cfg))
        if ending is None:
            failures.append(session.error)
            return
        verdict_key, verdict = _filed(cfg, key, ending, store, run_id)
        recorded += 1
        monitor.verdict(verdict_key, verdict)

    try:
        await asyncio.gather(*(one(k) for k in keys))
    finally:
        bench.close()
        await client.aclose()
    return RunOutcome(run_id, cfg.store, recorded, len(ended), len(failures), tuple(failures))


def _filed(
    cfg: RunConfig, key: SessionKey, ending: Ending, store: Store, run_id: str
) -> tuple[VerdictKey, Verdict]:
    """The session's verdict as stored: the evaluator filed a submit's; a session without one is no_code."""
    model = cfg.model
    if ending.submitted:  # filed before the submit answered (api/runner.py), under the backend it named
        backend = str((ending.answer or {}).get("backend") or cfg.backend)
        filed = VerdictKey(key.problem.key, key.sample, 0, backend, model)
        stored = store.find(run_id, filed)
        if stored is None:
            raise KbenchError(f"{key.problem.key} sample {key.sample}: submitted, but no verdict is filed")
        return filed, stored.verdict
    verdict_key = VerdictKey(key.problem.key, key.sample, 0, cfg.backend, model)
    verdict = Verdict(
        status=Status.NO_CODE,
        problem_key=key.problem.key,
        backend=cfg.backend,
        preset=cfg.preset,
        dtype=cfg.dtype,
        device=cfg.device,
        message=f"the agent submitted nothing: {ending.reason}",
    )
    store.record(run_id, verdict_key, verdict, "", "")
    return verdict_key, verdict
