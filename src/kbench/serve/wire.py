"""What `kbench serve` and its client say to each other: pydantic models of the JSON on the wire.

No FastAPI here, so the client (kbench/client.py) shares these models with nothing but pydantic. A
verdict travels as the results database stores it (store/codec.py: the dataclass fields, enums as their
values), so the client rebuilds the same typed `Verdict` that `Evaluator.evaluate` returns.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, WithJsonSchema

from kbench.api.jobs import MAX_INDEX, MAX_PRIORITY, JobState, Ticket
from kbench.config import BackendName
from kbench.store.codec import from_dict, to_dict
from kbench.types import Problem, Status, Verdict

API = "/v1"
MAX_ADDRESS = 512  # characters of a problem address
MAX_MODEL = 200  # characters of a model name
MAX_TURNS = 64  # turns of a remote episode
MAX_TIMEOUT_S = 86_400.0  # a request's timeout_s: it only ever shortens the service's budgets
# A build's command line in a log: ninja's "[1/2] c++ ...", "FAILED: x.o" and the compiler invoked with flags
_COMMAND = re.compile(
    r"^\s*(\[\d+/\d+\]\s|FAILED:\s|(\S*/)?(c\+\+|g\+\+|gcc|cc|clang\+\+|clang|nvcc|ninja|ld)(\s+-\S+)+)"
)


@cache
def verdict_schema() -> dict[str, Any]:
    """The JSON schema of a verdict as it travels (the Verdict dataclass's fields), its definitions
    inlined: the service's OpenAPI types a verdict field by it rather than as a bare object."""
    schema = TypeAdapter(Verdict).json_schema(mode="serialization")
    defs = schema.pop("$defs", {})

    def inline(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref", "")
            if ref.startswith("#/$defs/"):
                return inline(defs[ref.removeprefix("#/$defs/")])
            return {k: inline(v) for k, v in node.items()}
        if isinstance(node, list):
            return [inline(v) for v in node]
        return node

    return dict(inline(schema))


VerdictJSON = Annotated[dict[str, Any], WithJsonSchema(verdict_schema())]


class ErrorView(BaseModel):
    """Every refusal's body: one line saying what was wrong and, where there is one, the fix."""

    detail: str


class SubmitRequest(BaseModel):
    """One candidate. `sample` and `turn` file the verdict in the service's run; without `sample` the
    next free one is taken. Resubmitting a key returns the job in flight or the stored verdict."""

    model_config = ConfigDict(extra="forbid")

    problem: str = Field(min_length=1, max_length=MAX_ADDRESS)
    source: str = Field(min_length=1)
    backend: BackendName | None = None
    sample: int | None = Field(default=None, ge=0, le=MAX_INDEX)
    turn: int = Field(default=0, ge=0, le=MAX_INDEX)
    model: str | None = Field(default=None, min_length=1, max_length=MAX_MODEL)
    completion: str = ""
    # the client's name for this submission: a retry with the same key gets the same job (the
    # Idempotency-Key header says the same for a single submission)
    idempotency_key: str | None = Field(default=None, min_length=1, max_length=MAX_ADDRESS)
    # higher first among the jobs waiting for a builder or a device lane (equal ones keep their order)
    priority: int = Field(default=0, ge=-MAX_PRIORITY, le=MAX_PRIORITY)
    # each of the candidate's phases (import, correctness, timing) at most this long; it only shortens
    # the service's own budgets (--timeout); compiles keep the build budget
    timeout_s: float | None = Field(default=None, gt=0, le=MAX_TIMEOUT_S)


class KeyView(BaseModel):
    problem_key: str
    sample: int
    turn: int
    backend: str
    model: str


class JobView(BaseModel):
    """A job as the service sees it; `verdict` once `state` is done, `error` once it failed."""

    id: str
    state: JobState
    key: KeyView
    run_id: str | None = None
    submitted_at: float
    finished_at: float | None = None
    stored: bool = False  # the verdict was already in the run (a resubmitted key): not judged again
    error: str | None = None
    verdict: VerdictJSON | None = None
    speedup: dict[str, float | None] | None = None  # by baseline mode, for readers without kbench
    # The next user turn a multi-turn loop would send the model (the RL environment's own: what was found,
    # no secret seed, no host path), so a remote trainer needs no kbench to build it.
    feedback: str | None = None

    @classmethod
    def of(cls, ticket: Ticket, run_id: str | None, ident: str | None = None) -> JobView:
        """The view of `ticket`, named `ident` where the service knows it by another id (a job queued
        again after a restart keeps the id its client was given)."""
        state = ticket.state
        error = ticket.error() if state is JobState.FAILED else None
        verdict = ticket.future.result() if state is JobState.DONE else None
        return cls(
            id=ident or ticket.id,
            state=state,
            key=KeyView(**to_dict(ticket.key)),
            run_id=run_id,
            submitted_at=ticket.submitted_at,
            finished_at=ticket.finished_at,
            stored=ticket.stored,
            error=f"{type(error).__name__}: {error}" if error is not None else None,
            verdict=served(to_dict(verdict)) if verdict is not None else None,
            speedup={mode: verdict.speedup(mode) for mode, _ in verdict.baselines} if verdict else None,
            feedback=_feedback(ticket.key.backend, verdict) if verdict is not None else None,
        )

    def typed_verdict(self) -> Verdict | None:
        return from_dict(Verdict, self.verdict, f"job {self.id}") if self.verdict is not None else None  # type: ignore[no-any-return]


class BatchRequest(BaseModel):
    """Several candidates in one request: each is admitted, or refused with its own reason, alone."""

    model_config = ConfigDict(extra="forbid")

    jobs: list[SubmitRequest] = Field(min_length=1)


class BatchItem(BaseModel):
    """One submission of a batch: its job, or the status and one-line reason it was refused with."""

    job: JobView | None = None
    status: int = 202
    error: str | None = None


class BatchView(BaseModel):
    jobs: list[BatchItem]


class EpisodeRequest(BaseModel):
    """A remote RL episode on one problem (rl/env.py's KernelEnv on the service's Evaluator)."""

    model_config = ConfigDict(extra="forbid")

    problem: str = Field(min_length=1, max_length=MAX_ADDRESS)
    backend: BackendName | None = None
    model: str | None = Field(default=None, min_length=1, max_length=MAX_MODEL)
    max_turns: int = Field(default=4, ge=1, le=MAX_TURNS)
    stop_when_correct: bool = False
    end_on_cheat: bool = True
    reward: Literal["speedup", "correct"] = "speedup"


class Message(BaseModel):
    role: Literal["system", "user", "assistant"]
    content: str


class EpisodeView(BaseModel):
    """An episode: the conversation so far (system first; the last user turn is what the model answers
    next), the problem, and where its verdicts are filed (`sample`; one turn per step)."""

    id: str
    problem: ProblemView
    backend: str
    model: str | None
    sample: int
    turn: int  # the turn the next step is judged as
    max_turns: int
    done: bool
    rewards: list[float]
    messages: list[Message]


class StepRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    completion: str  # the model's whole answer; its code is extracted as `kbench run` does


class StepView(BaseModel):
    """One judged turn: the reward, the feedback (the next user turn), whether the episode ended."""

    episode: str
    turn: int
    status: Status
    rule: str | None
    reward: float
    terminated: bool  # ended by itself: a cheat, or correct with stop_when_correct
    truncated: bool  # max_turns reached
    done: bool
    feedback: str
    verdict: VerdictJSON

    def typed_verdict(self) -> Verdict:
        return from_dict(Verdict, self.verdict, f"episode {self.episode} turn {self.turn}")  # type: ignore[no-any-return]


class ProblemView(BaseModel):
    key: str
    level: int
    number: int
    name: str
    tags: list[str]
    presets: list[str]

    @classmethod
    def of(cls, problem: Problem) -> ProblemView:
        return cls(
            key=problem.key,
            level=problem.level,
            number=problem.number,
            name=problem.name,
            tags=list(problem.tags),
            presets=list(problem.presets),
        )


class QueueView(BaseModel):
    queued: int
    building: int
    ready: int
    running: int
    pending: int  # all of the above
    capacity: int  # the most pending jobs the service accepts (429 beyond)
    finished: int
    failed: int


class Health(BaseModel):
    status: Literal["ok", "closing"]
    version: str
    run_id: str | None
    source: str
    device: str
    backend: str
    preset: str
    measure: bool
    queue: QueueView
    reference_runs: int
    reference_reuses: int


def served(value: Any) -> Any:
    """A verdict's JSON as the service hands it out: every text without this machine's paths (cut to
    their last part, as the RL feedback has them) and without build command lines (the compiler's and
    ninja's invocations, every include path of the host), whatever field it is in."""
    from kbench.prompts.logs import strip_paths  # the service's side only: the client never calls this

    if isinstance(value, str):
        if "/" not in value:
            return value
        kept = [line for line in value.split("\n") if not _COMMAND.match(line)]
        return strip_paths("\n".join(kept))
    if isinstance(value, dict):
        return {k: served(v) for k, v in value.items()}
    if isinstance(value, list):
        return [served(v) for v in value]
    return value


def _feedback(backend: str, verdict: Verdict) -> str:
    from kbench.prompts import refine_message  # the service's side only: the client never calls this

    no_code = verdict.status is Status.NO_CODE
    return refine_message(backend, None if no_code else verdict, verdict.message if no_code else "")
