"""kbench as a `verifiers` taskset (rl/verifiers_env.py, the package kbench_verifiers), loaded by its id as
verifiers' CLI loads one, its tasks scored as verifiers scores a finished rollout (`Task.score(trace)`),
on the CPU with recorded replies: each trace gets a reward and kbench's metrics, and an item that cannot be
judged gets reward 0 with its reason, never an error that would fail the rollout."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from apifixtures import HONEST, WRONG, shared_cache
from optional import Lazy, needs

pytestmark = needs("verifiers.v1")
vf = Lazy("verifiers.v1")  # imported by the first test that runs, not by every worker's collection


@pytest.fixture
def kbench_env(
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
    shared_builds: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Path:
    cache = shared_cache(tmp_path_factory, shared_builds)
    for name, value in {"DEVICE": "cpu", "BACKEND": "cpp", "PRESET": "small", "STORE": str(tmp_path / "k.db"),
                        "CACHE_DIR": str(cache), "BASELINES": '["eager"]', "TIMING_BUDGET_S": "0.5"}.items():  # fmt: skip
        monkeypatch.setenv(f"KBENCH_{name}", value)
    return tmp_path / "k.db"


def _trace(task: object, reply: str) -> object:
    from verifiers.v1.trace import AgentInfo, Trace, TraceTask

    return Trace(
        task=TraceTask(type=type(task).__name__, data=task.data),  # type: ignore[attr-defined]
        agent=AgentInfo(config=vf.AgentConfig()),
        root_reply=reply,
    )


def test_its_id_loads_the_taskset_with_kbench_prompts(kbench_env: Path) -> None:
    config = vf.EnvConfig(taskset={"id": "kbench-verifiers", "problems": ["2/1", "2/5"], "shots": "zero"})
    tasks = list(vf.load_taskset(config.taskset))
    assert [t.key for t in tasks] == ["kbench:2/1:cpp", "kbench:2/5:cpp"]
    from kbench.problems import get_problem, select
    from kbench.prompts import PromptOptions, build_prompt

    expected = build_prompt(get_problem("2/1"), PromptOptions("cpp", shots="zero", preset="small"))
    assert tasks[0].data.prompt == expected.text and tasks[0].data.system_prompt == (expected.system or None)
    whole = vf.load_taskset(vf.EnvConfig(taskset={"id": "kbench-verifiers"}).taskset)
    assert [t.data.problem for t in whole] == [
        p.key for p in select("kbench", level=2)
    ]  # the default: level 2


@pytest.mark.slow
def test_every_rollout_gets_a_reward_and_a_failed_one_its_reason(kbench_env: Path) -> None:
    from kbench.rl.adapters import shared_evaluator
    from kbench.rl.verifiers_env import KernelData, KernelTask, KernelTaskConfig

    config = vf.EnvConfig(
        taskset={"id": "kbench-verifiers", "problems": ["2/1"], "task": {"reward": "correct"}}
    )
    (task,) = vf.load_taskset(config.taskset)
    unknown = KernelTask(KernelData(problem="9/999", backend="cpp"), KernelTaskConfig())
    traces = [_trace(task, f"```python\n{HONEST}\n```"), _trace(task, WRONG), _trace(task, "no code here")]
    traces.append(_trace(unknown, HONEST))

    async def score_all() -> None:  # concurrently, as verifiers scores a group of rollouts
        await asyncio.gather(
            *(t.score(tr) for t, tr in zip([task, task, task, unknown], traces, strict=True))
        )

    try:
        asyncio.run(score_all())
    finally:
        shared_evaluator().close()
    honest, wrong, empty, missing = traces
    assert honest.rewards["kbench_reward"].score == 1.0  # type: ignore[attr-defined]
    assert honest.metrics == {
        "correct": 1.0,
        "speedup": honest.metrics["speedup"],
        "cheat": 0.0,
        "judged": 1.0,
    }  # type: ignore[attr-defined]
    assert honest.info["kbench"]["status"] == "ok"  # type: ignore[attr-defined]
    assert wrong.rewards["kbench_reward"].score == 0.0 and wrong.info["kbench"]["status"] == "mismatch"  # type: ignore[attr-defined]
    assert empty.info["kbench"]["status"] == "no_code" and empty.metrics["judged"] == 1.0  # type: ignore[attr-defined]
    assert missing.rewards["kbench_reward"].score == 0.0 and missing.metrics["judged"] == 0.0  # type: ignore[attr-defined]
    assert "no problem 9/999" in missing.info["kbench"]["reason"]  # type: ignore[attr-defined]
    from kbench.store import Store

    with Store(kbench_env) as store:
        (run,) = store.runs()
        assert {k.model for k, _ in store.verdicts(run.run_id)} == {"verifiers"}
