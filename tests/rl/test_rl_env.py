"""The RL environment over a few turns against a local LLM test server: a real Evaluator (cpp on the CPU),
a model that answers without code, then wrongly, then correctly; the feedback it reads each turn, the
rewards, the episode's end, and the run in the store. The GRPO reward and the Gymnasium-style env on the
same Evaluator."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from apifixtures import HONEST, PROBLEM, WRONG, api_config, shared_cache
from llmserver import load_server_module
from typer.testing import CliRunner

from kbench.api import Evaluator
from kbench.cli import app
from kbench.extract import extract
from kbench.rl import EnvOptions, GymKernelEnv, KernelEnv, grpo_reward
from kbench.store import Store, VerdictKey
from kbench.types import Status

pytestmark = pytest.mark.slow
ANSWERS = [
    "I will fuse the GEMM, the bias and the ReLU into one OpenMP loop.",  # no code
    f"Here it is.\n\n```python\n{WRONG}\n```\n",
    f"Fixed the scale.\n\n```python\n{HONEST}\n```\n",
]


def _answer(request) -> str:  # type: ignore[no-untyped-def]
    turn = sum(m.get("role") == "assistant" for m in request.messages)
    return ANSWERS[turn]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("rl") / "k.db"


@pytest.fixture(scope="module")
def ev(tmp_path_factory: pytest.TempPathFactory, store: Path, shared_builds: Path) -> Iterator[Evaluator]:
    with Evaluator(
        api_config(shared_cache(tmp_path_factory, shared_builds), store), model="rl-test"
    ) as evaluator:
        yield evaluator


def test_an_episode_against_a_local_llm_server(ev: Evaluator, store: Path, tmp_path: Path) -> None:
    import openai

    env = KernelEnv(ev, options=EnvOptions(max_turns=3))
    results = []
    with load_server_module().LLMServer(respond=_answer) as server:
        llm = openai.OpenAI(base_url=server.openai_url, api_key="test", max_retries=0)
        prompt = env.reset("2/1")
        while not (results and results[-1].done):
            reply = llm.chat.completions.create(model="test", messages=env.messages)  # type: ignore[arg-type]
            results.append(env.step(reply.choices[0].message.content or ""))
        seen = list(server.stats.seen)
    assert [r.verdict.status for r in results] == [Status.NO_CODE, Status.MISMATCH, Status.OK]
    assert [r.reward for r in results] == [0.0, 0.0, 1.0]  # correct; not timed, so no speed term
    assert [(r.terminated, r.truncated) for r in results] == [(False, False), (False, False), (False, True)]
    # what the model read: the prompt, then each turn's feedback, in one conversation
    assert seen[0].last_user == prompt and "class Model(" in prompt
    assert "No usable code" in seen[1].last_user and "mismatch" in seen[2].last_user
    assert seen[0].system == env.prompt.system != ""  # type: ignore[union-attr]
    assert [len(r.messages) for r in seen] == [
        1,
        3,
        5,
    ]  # the user turn, then an assistant and a user per turn
    with Store(store) as db:
        records = [r for r in db.records(ev.run_id or "") if r.key.sample == env.sample]
    assert [r.key for r in records] == [
        VerdictKey(PROBLEM, env.sample, t, "cpp", "rl-test") for t in range(3)
    ]
    assert [r.completion_text for r in records] == ANSWERS
    assert records[0].candidate_source == "" and records[2].candidate_source == extract(ANSWERS[2]).source
    report = CliRunner().invoke(
        app, ["report", ev.run_id or "", "--store", str(store), "--out", str(tmp_path / "r.html")]
    )
    assert report.exit_code == 0, report.output


def test_grpo_reward_and_gym_env_on_the_evaluator(ev: Evaluator) -> None:
    reward = grpo_reward(ev)
    completions = [[{"role": "assistant", "content": text}] for text in ANSWERS]
    assert reward(prompts=["p"] * 3, completions=completions, problem=["2/1"] * 3) == [0.0, 0.0, 1.0]
    gym = GymKernelEnv(ev, ["2/1"], options=EnvOptions(stop_when_correct=True))
    first, info = gym.reset(seed=0)
    feedback, score, terminated, truncated, step = gym.step(ANSWERS[2])
    assert info["problem"] == PROBLEM and "ModelNew" in first
    assert (score, terminated, truncated, step["status"]) == (1.0, True, False, "ok")
    assert "correct" in feedback


def test_gymnasium_makes_the_registered_env_which_passes_its_checker(ev: Evaluator) -> None:
    """`gymnasium.make` by id (the module imported on the way), gymnasium's env checker on what it made,
    then an episode judged by the real evaluator through gymnasium's own wrappers."""
    gymnasium = pytest.importorskip("gymnasium")
    from gymnasium.utils.env_checker import check_env

    env = gymnasium.make("kbench.rl.gym:kbench/Kernel-v0", evaluator=ev, problems=["2/1"], max_turns=3)
    assert env.spec is not None and env.spec.id == "kbench/Kernel-v0" and env.spec.nondeterministic
    check_env(env.unwrapped)  # a random-text action is a no-code turn: no worker runs for it
    prompt, info = env.reset(seed=1)
    assert info["problem"] == PROBLEM and "class Model(" in prompt
    feedback, reward, terminated, truncated, step = env.step(ANSWERS[1])
    assert (step["status"], reward, terminated, truncated) == ("mismatch", 0.0, False, False)
    feedback, reward, terminated, truncated, step = env.step(ANSWERS[2])
    assert (step["status"], reward, step["turn"]) == ("ok", 1.0, 1) and "correct" in feedback
    env.close()  # the evaluator was passed in: it stays open
    assert not ev.closed
    own = gymnasium.make("kbench/Kernel-v0", config=ev.config, problems=["2/1"])
    made = own.unwrapped.evaluator  # type: ignore[attr-defined]
    assert made is not ev and not made.closed
    own.close()  # the env made this one: closing the env closes it
    assert made.closed


def test_the_grpo_example_runs_as_the_readme_shows(
    tmp_path_factory: pytest.TempPathFactory, shared_builds: Path
) -> None:
    """examples/grpo_reward.py, as a user runs it: recorded completions (no code, wrong, correct) judged in
    one batch, their rewards printed."""
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "KBENCH_CACHE_DIR": str(shared_cache(tmp_path_factory, shared_builds)),
           "KBENCH_STORE": str(tmp_path_factory.mktemp("example") / "k.db")}  # fmt: skip
    done = subprocess.run([sys.executable, str(root / "examples" / "grpo_reward.py")], env=env,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "rewards [0.0, 0.0, 1.0]" in done.stdout, done.stdout + done.stderr[-2000:]


def test_the_env_and_the_reward_evaluate_only_their_sources_problems(ev: Evaluator, tmp_path: Path) -> None:
    """A problem's code runs trusted in the reference: neither an episode nor a dataset row may name a file,
    a `..` or another source, even one that exists."""
    from kbench.errors import ProblemError

    planted = tmp_path / "level2" / "1_planted.py"
    planted.parent.mkdir()
    planted.write_text("import torch\n")
    env = KernelEnv(ev)
    reward = grpo_reward(ev)
    for address in (str(planted), f"{tmp_path}:2/1", "kbench:../level2/1_planted.py", ".."):
        with pytest.raises(ProblemError, match="a path is not a problem|only"):
            env.reset(address)
        # a dataset row naming one earns 0 (its reason logged); nothing of it runs
        assert reward(prompts=["p"], completions=[ANSWERS[2]], problem=[address]) == [0.0]
    assert "ModelNew" in env.reset("2/1")
