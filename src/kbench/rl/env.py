"""A multi-turn RL environment over the Evaluator: the prompt in, a completion back, a verdict and a reward.

    env = KernelEnv(evaluator)                    # one episode at a time; many envs may share one evaluator
    prompt = env.reset("2/1")                     # the first user turn (env.prompt.system is the system one)
    result = env.step(completion)                 # extract -> evaluate -> verdict, feedback, reward, done

`step` runs what `kbench run --turns N` runs for one sample: the code is extracted from the completion
(extract.py; none found is a `no_code` verdict, filed too), judged by the Evaluator, and the next user
turn is the feedback a multi-turn run would send (prompts.refine_message). Each episode is one sample of
the Evaluator's run and each step one turn, so `kbench report RUN` shows an RL session like any run.

An episode ends (`terminated`) on a `cheat` (with `end_on_cheat`) or a correct kernel (with
`stop_when_correct`), and is cut (`truncated`) after `max_turns` steps. Whatever reward is plugged in, a
`cheat` never earns more than 0.
"""

from __future__ import annotations

from dataclasses import dataclass

from kbench.api import Evaluator, Submission
from kbench.errors import ConfigError
from kbench.rl.reward import Reward, as_reward
from kbench.types import Problem, Prompt, Status, Verdict


@dataclass(frozen=True)
class EnvOptions:
    """`backend`: what the prompt asks for and the evaluator builds (default: the evaluator's config).
    `model`: the verdict key's model (default: the config's model, else "api")."""

    max_turns: int = 4
    stop_when_correct: bool = False
    end_on_cheat: bool = True
    backend: str | None = None
    model: str | None = None


@dataclass(frozen=True)
class StepResult:
    verdict: Verdict
    feedback: str  # the next user turn: what the evaluator found and what to do
    reward: float
    terminated: bool  # the episode ended by itself (a cheat, or correct with stop_when_correct)
    truncated: bool  # the turn budget ran out
    turn: int  # the turn this step judged (0 for the first)

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated


class KernelEnv:
    """One episode at a time, on a shared Evaluator (not thread-safe itself: one env per rollout)."""

    def __init__(
        self, evaluator: Evaluator, reward: Reward | str = "speedup", options: EnvOptions | None = None
    ) -> None:
        self.evaluator = evaluator
        self.reward = as_reward(reward)
        self.options = options or EnvOptions()
        if self.options.max_turns < 1:
            raise ConfigError(f"max_turns must be at least 1, got {self.options.max_turns}")
        self.backend = self.options.backend or evaluator.config.backend
        self.problem: Problem | None = None
        self.prompt: Prompt | None = None
        self.sample = 0
        self.turn = 0
        self.done = True
        self.messages: list[dict[str, str]] = []  # the conversation so far, system message first

    def reset(self, problem: str | Problem) -> str:
        """Start an episode on `problem` (a new sample of the run); returns the first user turn."""
        from kbench.prompts import PromptOptions, build_prompt

        cfg = self.evaluator.config
        self.problem = self.evaluator.problem(problem, strict=True)  # its source's problems, never a path
        options = PromptOptions(self.backend, cfg.dtype, cfg.shots, cfg.hardware_facts, cfg.chain_of_thought)
        self.prompt = build_prompt(self.problem, options)
        self.sample = self.evaluator.next_sample(self.problem, self.backend, self.options.model)
        self.turn, self.done = 0, False
        system = [{"role": "system", "content": self.prompt.system}] if self.prompt.system else []
        self.messages = [*system, {"role": "user", "content": self.prompt.text}]
        return self.prompt.text

    def step(self, completion: str) -> StepResult:
        """Judge one completion (blocks until its verdict)."""
        submission, reason = self._submission(completion)
        if submission.source:
            verdict = self.evaluator.submit(submission).verdict()
        else:
            verdict = self.evaluator.record_no_code(submission, reason)
        return self._advance(completion, verdict, reason)

    async def astep(self, completion: str) -> StepResult:
        """`step` for asyncio code."""
        import asyncio

        submission, reason = self._submission(completion)
        if submission.source:
            ticket = await asyncio.to_thread(self.evaluator.submit, submission)
            verdict = await asyncio.wrap_future(ticket.future)
        else:
            verdict = await asyncio.to_thread(self.evaluator.record_no_code, submission, reason)
        return self._advance(completion, verdict, reason)

    def _submission(self, completion: str) -> tuple[Submission, str]:
        from kbench.extract import extract

        if self.problem is None or self.done:
            raise ConfigError("the episode is over or was never started: call reset(problem) first")
        found = extract(completion)
        submission = Submission(self.problem, found.source or "", self.backend, self.sample, self.turn,
                                self.options.model, completion)  # fmt: skip
        return submission, found.reason

    def _advance(self, completion: str, verdict: Verdict, reason: str) -> StepResult:
        from kbench.generate import EMPTY_ANSWER
        from kbench.prompts import refine_message

        reward = self.reward(verdict)
        cheat = verdict.status is Status.CHEAT
        if cheat:
            reward = min(reward, 0.0)  # never pay a cheat, whichever reward is plugged in
        feedback = refine_message(self.backend, None if verdict.status is Status.NO_CODE else verdict, reason)
        self.messages += [
            {"role": "assistant", "content": completion or EMPTY_ANSWER},
            {"role": "user", "content": feedback},
        ]
        terminated = (cheat and self.options.end_on_cheat) or (verdict.ok and self.options.stop_when_correct)
        truncated = not terminated and self.turn + 1 >= self.options.max_turns
        result = StepResult(verdict, feedback, reward, terminated, truncated, self.turn)
        self.turn += 1
        self.done = result.done
        return result
