"""What the results database stores, as values: keys, runs, problems, requests, messages, verdicts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kbench.types import Verdict


@dataclass(frozen=True, order=True)
class VerdictKey:
    """What one verdict is about; unique within a run."""

    problem_key: str
    sample: int = 0
    turn: int = 0
    backend: str = ""
    model: str = ""


@dataclass(frozen=True)
class RunInfo:
    run_id: str
    created_at: str
    config: dict[str, Any]
    hardware: dict[str, Any]
    fingerprint: str
    kbench_version: str
    git_commit: str | None
    verdicts: int = 0
    ok: int = 0
    backends: tuple[str, ...] = ()  # of the run's verdicts (its config names one backend, or none)
    models: tuple[str, ...] = ()  # of the run's verdicts (e.g. reference/cpp for the shipped solutions)


@dataclass(frozen=True)
class ProblemMeta:
    key: str
    source: str
    level: int
    number: int
    name: str
    tags: tuple[str, ...] = ()
    code_hash: str = ""


@dataclass(frozen=True)
class RequestRecord:
    """One answer a run asked an LLM for: from the server, from the response cache, or a failure."""

    problem_key: str
    sample: int
    turn: int
    cached: bool
    error: str  # the failure's one-line reason (llm/failures.py); empty when answered
    input_tokens: int
    output_tokens: int
    cost_usd: float
    latency_s: float


@dataclass(frozen=True)
class StoredVerdict:
    """A verdict with everything stored beside it (what reports and exports read)."""

    run_id: str
    key: VerdictKey
    verdict: Verdict
    candidate_source: str
    completion_text: str
    created_at: str


@dataclass(frozen=True)
class MessageRecord:
    """What a run told the model at one turn of one sample: `system` (turn 0), and `user`: the task at
    turn 0, the evaluator's feedback on the previous answer at every later turn."""

    problem_key: str
    sample: int
    turn: int
    role: str  # system | user
    text: str

    @property
    def kind(self) -> str:
        if self.role == "system":
            return "system prompt"
        return "prompt" if self.turn == 0 else "feedback"


@dataclass(frozen=True)
class TranscriptStep:
    """One message of an agent's session, in order: `user` (the task, a nudge), `assistant` (text and tool
    calls, with the tokens of that answer), `tool` (a call's result, with the tool's seconds) and, last,
    `end` (why the session stopped: submitted, a budget spent, the model's failure). `message` is the
    llm.tooluse.Exchange's dict (`end`: `{"reason": ...}`)."""

    problem_key: str
    sample: int
    step: int
    role: str
    message: dict[str, Any]
    input_tokens: int = 0
    output_tokens: int = 0
    seconds: float = 0.0
