"""Rewards and the adapters' conventions, on verdicts made here (no worker runs)."""

from __future__ import annotations

import math
from concurrent.futures import Future
from dataclasses import replace
from typing import Any

import pytest

from kbench.api import Submission
from kbench.config import RunConfig
from kbench.errors import ConfigError
from kbench.evaluate.verdict import SUSPICIOUS_SPEEDUP
from kbench.problems import get_problem
from kbench.rl import (
    CorrectReward,
    EnvOptions,
    GymKernelEnv,
    KernelEnv,
    SpeedupReward,
    completion_text,
    flagged,
    get_reward,
    grpo_reward,
    grpo_reward_async,
)
from kbench.types import CheckReport, Finding, Problem, Severity, Status, TimingStats, Verdict

CODE = "```python\nclass ModelNew:\n    pass\n```"


def _stats(ms: float, meaningful: bool = True) -> TimingStats:
    return TimingStats(ms, ms, 0.0, 0.0, ms, 30, 0.001, meaningful=meaningful)


def _verdict(status: Status = Status.OK, speedup: float | None = None, **kw: Any) -> Verdict:
    timed: dict[str, Any] = {}
    if speedup is not None:
        timed = {"timing": _stats(1.0), "baselines": (("eager", _stats(speedup)), ("compile", _stats(1.0)))}
    return Verdict(status, "kbench:2/1", "cpp", "small", "fp32", "cpu", **(timed | kw))


@pytest.mark.parametrize(
    ("verdict", "expected"),
    [
        (_verdict(Status.MISMATCH), 0.0),
        (_verdict(Status.NO_CODE), 0.0),
        (_verdict(Status.CHEAT, 3.0, rule="inputs-mutated"), 0.0),
        (_verdict(Status.TIMEOUT), 0.0),
        (_verdict(), 1.0),  # correct, not timed
        (_verdict(speedup=1.0), 1.0),
        (_verdict(speedup=2.0), 1.0 + math.log(2.0)),
        (_verdict(speedup=0.75), 1.0 + math.log(0.75)),
        (_verdict(speedup=50.0), 1.0 + math.log(8.0)),  # clipped at max_speedup
        (_verdict(speedup=0.01), 1.0 + math.log(0.5)),  # clipped at min_speedup: still above a wrong one
    ],
)
def test_default_reward(verdict: Verdict, expected: float) -> None:
    assert get_reward("speedup")(verdict) == pytest.approx(expected)


def test_flagged_verdicts_and_untrustworthy_timings_earn_no_speed_term() -> None:
    warned = _verdict(speedup=2.0, checks=CheckReport((Finding("streams", Severity.WARN, "uses streams"),)))
    suspicious = _verdict(speedup=SUSPICIOUS_SPEEDUP * 1.5)
    assert flagged(warned) and flagged(suspicious) and not flagged(_verdict(speedup=2.0))
    assert SpeedupReward()(warned) == 0.0 and SpeedupReward()(suspicious) == 0.0
    interpreted = replace(_verdict(speedup=4.0), timing=_stats(1.0, meaningful=False))
    assert SpeedupReward()(interpreted) == 1.0  # Triton's interpreter: correct, no speed claim
    assert SpeedupReward(baseline="compile")(_verdict(speedup=4.0)) == 1.0  # compile took as long
    assert CorrectReward()(_verdict(speedup=2.0)) == 1.0 and CorrectReward()(warned) == 0.0


def test_reward_settings_are_checked() -> None:
    with pytest.raises(ConfigError, match="no more than a wrong one"):
        SpeedupReward(correct=0.5, min_speedup=0.1)
    with pytest.raises(ConfigError, match="min_speedup"):
        SpeedupReward(min_speedup=2.0)
    with pytest.raises(ConfigError, match="unknown reward 'fast'; choose one of: correct, speedup"):
        get_reward("fast")


class FakeEvaluator:
    """What the env and the GRPO reward use of an Evaluator, answering every candidate with `verdict`."""

    def __init__(self, verdict: Verdict) -> None:
        self.config = RunConfig(backend="cpp", device="cpu", preset="small")
        self.verdict, self.seen = verdict, list[Submission]()
        self.problems = {"2/1": get_problem("2/1")}  # a real problem: the prompt shows its preset's sizes

    def problem(self, address: Any, strict: bool = False) -> Problem:
        self.strict = strict
        return self.problems[address] if isinstance(address, str) else address

    def next_sample(self, *args: Any) -> int:
        return len(self.seen)

    def submit(self, submission: Submission) -> Any:
        self.seen.append(submission)
        ticket: Any = type("T", (), {})()
        ticket.future = Future()
        ticket.future.set_result(self.verdict)
        ticket.verdict = ticket.future.result
        return ticket

    def submit_many(self, submissions: list[Submission]) -> list[Any]:
        return [self.submit(s) for s in submissions]

    def record_no_code(self, submission: Submission, reason: str) -> Verdict:
        self.seen.append(submission)
        return _verdict(Status.NO_CODE, message=reason)


def test_a_cheat_earns_nothing_whatever_reward_is_plugged_in() -> None:
    cheat = _verdict(Status.CHEAT, rule="timer-patched")
    generous = lambda v: 5.0  # noqa: E731
    env = KernelEnv(FakeEvaluator(cheat), generous)  # type: ignore[arg-type]
    env.reset("2/1")
    result = env.step(CODE)
    assert (result.reward, result.terminated, result.truncated) == (0.0, True, False)
    assert "rule: timer-patched" in result.feedback
    reward = grpo_reward(FakeEvaluator(cheat), generous)  # type: ignore[arg-type]
    assert reward(prompts=["p"], completions=[CODE], problem=["2/1"]) == [0.0]


def test_env_turns_feedback_and_episode_end() -> None:
    fake = FakeEvaluator(_verdict(speedup=2.0))
    env = KernelEnv(fake, options=EnvOptions(max_turns=2))  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="reset"):
        env.step(CODE)
    prompt = env.reset("2/1")
    assert "ModelNew" in prompt and env.messages[-1] == {"role": "user", "content": prompt}
    no_code = env.step("I would fuse the GEMM and the ReLU.")
    assert no_code.verdict.status is Status.NO_CODE and no_code.reward == 0.0 and not no_code.done
    assert "No usable code" in no_code.feedback
    ok = env.step(CODE)
    assert ok.reward == pytest.approx(1 + math.log(2)) and ok.truncated and ok.turn == 1
    assert [(s.sample, s.turn) for s in fake.seen] == [(0, 0), (0, 1)]
    assert fake.seen[1].completion == CODE and [m["role"] for m in env.messages[-4:]] == [
        "assistant", "user", "assistant", "user"
    ]  # fmt: skip
    with pytest.raises(ConfigError, match="episode is over"):
        env.step(CODE)
    stop = KernelEnv(fake, options=EnvOptions(stop_when_correct=True))  # type: ignore[arg-type]
    stop.reset("2/1")
    assert stop.step(CODE).terminated


def test_the_async_grpo_reward_scores_like_the_sync_one_without_blocking_its_loop() -> None:
    import asyncio

    reward = grpo_reward_async(FakeEvaluator(_verdict(speedup=2.0)))  # type: ignore[arg-type]
    assert asyncio.iscoroutinefunction(reward) and reward.__name__ == "kbench_reward"

    async def batch_beside_a_ticker() -> tuple[list[float], int]:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        task = asyncio.create_task(ticker())
        got = await reward(prompts=["p"] * 2, completions=[CODE, "no code"], problem=["2/1", "2/1"])
        task.cancel()
        return got, ticks

    got, ticks = asyncio.run(batch_beside_a_ticker())
    assert got == [pytest.approx(1 + math.log(2)), 0.0] and ticks > 0  # no code earns 0
    with pytest.raises(ConfigError, match="no 'problem' column"):
        asyncio.run(reward(prompts=["p"], completions=[CODE]))


def test_grpo_reward_takes_both_dataset_formats_and_names_a_missing_column() -> None:
    reward = grpo_reward(FakeEvaluator(_verdict(speedup=2.0)))  # type: ignore[arg-type]
    conversational = [[{"role": "assistant", "content": CODE}], [{"role": "assistant", "content": "no code"}]]
    got = reward(
        prompts=[[{"role": "user", "content": "p"}]] * 2, completions=conversational, problem=["2/1"] * 2
    )
    assert got == [pytest.approx(1 + math.log(2)), 0.0]
    assert reward(prompts=["p"], completions=[CODE], problem=["2/1"], trainer_state=None) == [
        pytest.approx(1.693, abs=1e-3)
    ]
    assert reward.__name__ == "kbench_reward"
    with pytest.raises(ConfigError, match="no 'problem' column"):
        reward(prompts=["p"], completions=[CODE])
    assert completion_text({"content": "x"}) == "x" and completion_text([]) == ""


def test_gym_env_returns_the_standard_tuples_and_draws_problems_from_its_seed() -> None:
    pytest.importorskip("gymnasium")
    gym = GymKernelEnv(FakeEvaluator(_verdict()), ["2/1"], options=EnvOptions(max_turns=1))  # type: ignore[arg-type]
    observation, info = gym.reset(seed=3)
    assert isinstance(observation, str) and info["problem"] == "kbench:2/1"
    obs, reward, terminated, truncated, info = gym.step(CODE)
    assert (reward, terminated, truncated, info["status"]) == (1.0, False, True, "ok")
    assert isinstance(obs, str) and "correct" in obs
    with pytest.raises(ConfigError, match="at least one problem"):
        GymKernelEnv(FakeEvaluator(_verdict()), [])  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="render_mode"):
        GymKernelEnv(FakeEvaluator(_verdict()), ["2/1"], render_mode="human")  # type: ignore[arg-type]
    fake = FakeEvaluator(_verdict())
    fake.problems = {k: get_problem(k) for k in ("2/1", "2/2", "2/3", "2/4")}
    draws = GymKernelEnv(fake, list(fake.problems))  # type: ignore[arg-type]
    first = [draws.reset(seed=7)[1]["problem"]] + [draws.reset()[1]["problem"] for _ in range(5)]
    again = [draws.reset(seed=7)[1]["problem"]] + [draws.reset()[1]["problem"] for _ in range(5)]
    assert first == again and len(set(first)) > 1  # seeded, and not always the same problem
    assert draws.reset(options={"problem": "2/3"})[1]["problem"] == "kbench:2/3"


def test_gym_spaces_hold_any_text_and_the_env_passes_gymnasiums_checker() -> None:
    gymnasium = pytest.importorskip("gymnasium")
    from gymnasium.utils.env_checker import check_env

    gym = GymKernelEnv(FakeEvaluator(_verdict()), ["2/1"], render_mode="ansi")  # type: ignore[arg-type]
    observation, _ = gym.reset()
    assert gym.observation_space.contains(observation) and gym.action_space.contains(CODE)
    assert gym.action_space.contains("")  # an empty answer is an action (judged no_code)
    assert gym.observation_space.contains("x ≤ 1e-4 — «ok»") and not gym.observation_space.contains("")
    assert not gym.action_space.contains(b"bytes") and gym.action_space.contains(gym.action_space.sample())
    check_env(gym)  # spaces, reset/step signatures and returns, seeding, determinism, render, close
    prompt, _ = gym.reset()
    assert gym.render() == prompt  # "ansi": the last turn as text
    feedback = gym.step(CODE)[0]
    assert gym.render() == feedback
    assert isinstance(gym, gymnasium.Env)


def test_one_item_without_a_verdict_earns_zero_and_spares_the_batch(caplog: pytest.LogCaptureFixture) -> None:
    """An unknown problem and a job that failed get reward 0 and their reason in the log; the batch's other
    items are judged as ever (a trainer's step never fails on one row)."""
    from kbench.errors import ProblemError

    class Partial(FakeEvaluator):
        def problem(self, address: Any, strict: bool = False) -> Problem:
            if address == "9/999":
                raise ProblemError("no problem 9/999 in kbench")
            return super().problem(address, strict)

        def submit(self, submission: Submission) -> Any:
            ticket = super().submit(submission)
            if "FAIL" in submission.completion:
                ticket.verdict = lambda: (_ for _ in ()).throw(RuntimeError("lane lost"))
            return ticket

    reward = grpo_reward(Partial(_verdict(speedup=2.0)))  # type: ignore[arg-type]
    with caplog.at_level("WARNING", logger="kbench.rl.adapters"):
        got = reward(
            prompts=["p"] * 3, completions=[CODE, CODE, CODE + "\n# FAIL"], problem=["2/1", "9/999", "2/1"]
        )
    assert got == [pytest.approx(1 + math.log(2)), 0.0, 0.0]
    assert "9/999: no problem 9/999 in kbench" in caplog.text
    assert "the evaluation failed (RuntimeError: lane lost)" in caplog.text


def test_sample_and_turn_numbers_are_bounded() -> None:
    from kbench.api.jobs import MAX_INDEX

    with pytest.raises(
        ConfigError, match=f"sample {10**30} is out of range: a verdict's sample is 0 to {MAX_INDEX}"
    ):
        Submission("2/1", CODE, sample=10**30)
    with pytest.raises(ConfigError, match="turn -1 is out of range"):
        Submission("2/1", CODE, turn=-1)
    assert Submission("2/1", CODE, sample=MAX_INDEX).sample == MAX_INDEX
