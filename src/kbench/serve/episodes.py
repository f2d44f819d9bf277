"""Remote RL episodes: the RL environment (rl/env.py) over HTTP, so a trainer needs no kbench to run one.

    POST   /v1/episodes               {problem, backend?, model?, max_turns?, stop_when_correct?,
                                       end_on_cheat?, reward?}  -> 201 EpisodeView (prompt, messages)
    POST   /v1/episodes/{id}/step     {completion} -> StepView once judged (reward, feedback, verdict)
    GET    /v1/episodes/{id}          -> EpisodeView
    DELETE /v1/episodes/{id}          -> 204; the episode is forgotten (its verdicts stay in the run)

An episode is one sample of the service's run and each step one turn, judged by the service's Evaluator
like every job: the same queue (429 when full), the same checks, the verdicts filed in the same run. A
step blocks until its verdict; one step of an episode at a time (409 while one is in flight). The service
keeps at most `max_episodes` episodes: a new one forgets the oldest ended one, or is refused with 429.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from fastapi import APIRouter, Response
from fastapi.exceptions import HTTPException

from kbench.api import Evaluator
from kbench.rl.env import EnvOptions, KernelEnv
from kbench.serve.jobs import check_room, refusals
from kbench.serve.server import ServiceLimits
from kbench.serve.wire import EpisodeRequest, EpisodeView, Message, ProblemView, StepRequest, StepView, served
from kbench.store.codec import to_dict


@dataclass
class Episode:
    id: str
    env: KernelEnv
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    rewards: list[float] = field(default_factory=list)

    def view(self) -> EpisodeView:
        env = self.env
        assert env.problem is not None
        return EpisodeView(
            id=self.id,
            problem=ProblemView.of(env.problem),
            backend=env.backend,
            model=env.options.model,
            sample=env.sample,
            turn=env.turn,
            max_turns=env.options.max_turns,
            done=env.done,
            rewards=self.rewards,
            messages=[Message.model_validate(m) for m in env.messages],
        )


class EpisodeTable:
    """Open episodes by id, at most `keep`: a new one forgets the oldest ended one first."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self._episodes: OrderedDict[str, Episode] = OrderedDict()

    def add(self, episode: Episode) -> None:
        if len(self._episodes) >= self.keep:
            ended = next((k for k, e in self._episodes.items() if e.env.done and not e.lock.locked()), None)
            if ended is None:
                raise HTTPException(429, f"{self.keep} episodes are open; end one (DELETE) or retry later",
                                    {"Retry-After": "5"})  # fmt: skip
            del self._episodes[ended]
        self._episodes[episode.id] = episode

    def get(self, ident: str) -> Episode:
        episode = self._episodes.get(ident)
        if episode is None:
            raise HTTPException(404, f"no episode {ident!r} (unknown, ended and forgotten, or deleted)")
        return episode

    def remove(self, ident: str) -> None:
        self.get(ident)
        del self._episodes[ident]


def episode_routes(
    evaluator: Evaluator, limits: ServiceLimits, allowed: Callable[[str, str], None]
) -> APIRouter:
    """The episode endpoints; `allowed(address, source)` refuses a problem outside the service's source."""
    router = APIRouter()
    table = EpisodeTable(limits.max_episodes)

    @router.post("/episodes", status_code=201)
    async def start(body: EpisodeRequest) -> EpisodeView:
        allowed(body.problem, evaluator.config.source)
        options = EnvOptions(max_turns=body.max_turns, stop_when_correct=body.stop_when_correct,
                             end_on_cheat=body.end_on_cheat, backend=body.backend, model=body.model)  # fmt: skip
        with refusals():
            env = KernelEnv(evaluator, body.reward, options)
            await asyncio.to_thread(env.reset, body.problem)
        episode = Episode(uuid.uuid4().hex, env)
        table.add(episode)
        return episode.view()

    @router.get("/episodes/{ident}")
    async def show(ident: str) -> EpisodeView:
        return table.get(ident).view()

    @router.delete("/episodes/{ident}", status_code=204)
    async def end(ident: str) -> Response:
        table.remove(ident)
        return Response(status_code=204)

    @router.post("/episodes/{ident}/step")
    async def step(ident: str, body: StepRequest) -> StepView:
        episode = table.get(ident)
        if episode.env.done:
            raise HTTPException(409, f"episode {ident} is over ({len(episode.rewards)} turns); start another")
        if episode.lock.locked():
            raise HTTPException(409, f"a step of episode {ident} is being judged; wait for its answer")
        async with episode.lock:
            check_room(evaluator, limits)
            try:
                with refusals():
                    result = await episode.env.astep(body.completion)
            except HTTPException:
                raise
            except Exception as exc:  # the job failed on the service's side: no verdict for this turn
                raise HTTPException(500, f"the evaluation failed ({type(exc).__name__}: {exc})") from None
            episode.rewards.append(result.reward)
        verdict = result.verdict
        return StepView(
            episode=ident, turn=result.turn, status=verdict.status, rule=verdict.rule, reward=result.reward,
            terminated=result.terminated, truncated=result.truncated, done=result.done,
            feedback=result.feedback, verdict=served(to_dict(verdict)),
        )  # fmt: skip

    return router
