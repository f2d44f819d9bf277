"""kbench as a taskset of `verifiers` (v1 API, verifiers >= 0.4): one task per problem, its prompt kbench's,
its reward kbench's verdict of the rollout's last reply.

    vf-eval kbench-verifiers -n 8                          # the installed taskset package's id
    import verifiers.v1 as vf
    taskset = vf.load_taskset(vf.TasksetConfig(id="kbench-verifiers"))

verifiers finds a taskset as an installed top-level package exporting its `Taskset` subclass through
`__all__`: that package is `kbench_verifiers` (src/kbench_verifiers), which re-exports `KernelTaskset`
from here. Each task's data names its problem (an address of the evaluator's source, e.g. "2/1") and the
backend its prompt asks for; its prompt and system prompt are `kbench prompt`'s.

Scoring: the metric `kbench` judges the last reply once (the process's shared Evaluator, opened on first
use from the KBENCH_* environment as rl/verl.py's is: `KBENCH_DEVICE=cpu KBENCH_BACKEND=cpp
KBENCH_PRESET=small` on a machine without a GPU) and records `correct`, `speedup` (against eager; 0
without one), `cheat` and `judged` (0 where no verdict came); the reward `kbench_reward` is the taskset's
`reward` (a name of rl/reward.py, default speedup; a cheat earns at most 0). Nothing raises into the
rollout: an item without a verdict (no code, an unknown problem, a job that failed) earns 0 and its reason
goes to `trace.info["kbench"]`, with the verdict's status and message when there is one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import verifiers.v1 as vf

from kbench.rl.adapters import evaluate_texts, shared_evaluator
from kbench.rl.reward import as_reward
from kbench.types import Status, Verdict


class KernelData(vf.TaskData):
    """One problem: its address in the evaluator's source, and the backend its prompt asks for."""

    problem: str
    backend: str


class KernelTaskConfig(vf.TaskConfig):
    reward: str = "speedup"
    """The reward (a name of kbench.rl.reward: speedup, correct, ...), under `--env.taskset.task.reward`."""
    model: str = "verifiers"
    """The model name the verdicts are filed under in kbench's store."""


class KernelTask(vf.Task[KernelData, vf.State, KernelTaskConfig]):
    def __init__(self, data: KernelData, config: KernelTaskConfig | None = None) -> None:
        super().__init__(data, config)
        self._verdicts: dict[str, Verdict | str] = {}  # by trace id, from the metric to the reward

    @property
    def key(self) -> str:
        return f"{self.data.problem}:{self.data.backend}"

    @vf.metric
    async def kbench(self, trace: vf.Trace) -> dict[str, float]:
        """Judge the last reply (once per trace); the verdict's numbers, or zeros and the reason."""
        verdict = await self._verdict(trace)
        if isinstance(verdict, str):
            trace.info["kbench"] = {"status": "", "reason": verdict}
            return {"correct": 0.0, "speedup": 0.0, "cheat": 0.0, "judged": 0.0}
        trace.info["kbench"] = {"status": verdict.status.value, "reason": verdict.message}
        return {
            "correct": float(verdict.ok),
            "speedup": float(verdict.speedup("eager") or 0.0),
            "cheat": float(verdict.status is Status.CHEAT),
            "judged": 1.0,
        }

    @vf.reward(weight=1.0)
    async def kbench_reward(self, trace: vf.Trace) -> float:
        verdict = await self._verdict(trace, last=True)
        if isinstance(verdict, str):
            return 0.0
        try:
            value = float(as_reward(self.config.reward)(verdict))
        except Exception as exc:  # a misnamed reward: every item says so, none fails its rollout
            trace.info["kbench"] = {"status": verdict.status.value, "reason": f"reward: {exc}"}
            return 0.0
        return min(value, 0.0) if verdict.status is Status.CHEAT else value

    async def _verdict(self, trace: vf.Trace, last: bool = False) -> Verdict | str:
        """The trace's verdict, judged once: the metric (which verifiers runs first) judges and keeps it
        under the trace's id; the reward (`last`) takes it."""
        found = self._verdicts.pop(trace.id, None) if last else self._verdicts.get(trace.id)
        if found is None:
            found = await asyncio.to_thread(self._judge, trace.last_reply)
            if not last:
                self._verdicts[trace.id] = found
        return found

    def _judge(self, text: str) -> Verdict | str:
        try:
            ev = shared_evaluator()
        except Exception as exc:  # the evaluator itself cannot open: this item says why
            return f"kbench could not start: {exc}"
        try:
            return evaluate_texts(ev, [self.data.problem], [text], self.data.backend, self.config.model)[0]
        except Exception as exc:  # never into the rollout: its reward is 0 and this is why
            return f"{self.data.problem}: the evaluation failed ({type(exc).__name__}: {exc})"


class KernelTasksetConfig(vf.TasksetConfig):
    task: KernelTaskConfig = KernelTaskConfig()
    level: int | None = 2
    """The level whose problems the taskset holds (None: every level of the source)."""
    problems: list[str] = []
    """Addresses (e.g. ["2/1", "2/5"]); empty: every problem of `level`."""
    backend: str = ""
    """The backend the prompts ask for and the evaluator builds; empty: the KBENCH_* configuration's."""
    shots: str = ""
    """zero | one | few worked examples in each prompt; empty: the configuration's."""


class KernelTaskset(vf.Taskset[KernelTask, KernelTasksetConfig]):
    def load(self) -> Iterator[KernelTask]:
        from kbench.config import resolve
        from kbench.problems import select
        from kbench.prompts import PromptOptions, build_prompt

        cfg = resolve(None, {})
        backend = self.config.backend or cfg.backend
        options = PromptOptions(
            backend, cfg.dtype, self.config.shots or cfg.shots, cfg.hardware_facts, cfg.chain_of_thought,
            cfg.preset,
        )  # fmt: skip
        ids = self.config.problems or None
        for problem in select(cfg.source, level=None if ids else self.config.level, ids=ids):
            prompt = build_prompt(problem, options)
            data = KernelData(
                id=problem.key,
                name=problem.name,
                prompt=prompt.text,
                system_prompt=prompt.system or None,
                problem=problem.key,
                backend=backend,
            )
            yield KernelTask(data, self.config.task)


__all__ = ["KernelData", "KernelTask", "KernelTaskConfig", "KernelTaskset", "KernelTasksetConfig"]
