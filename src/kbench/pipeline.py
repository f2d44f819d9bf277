"""`kbench run`: select problems, obtain candidates, have the Evaluator judge and file them.

This module only wires stages together; the Evaluator (api/) builds, runs, judges and files every
verdict, on the local executor or on Ray, as it does for the service and the RL environment. Candidates
come either from the shipped hand-fused solutions (`--solutions shipped`, the main job: no API key
needed) or from a model through multi-turn refinement (generate.refine). Every verdict is written to the store the moment it arrives, keyed by
(problem, sample, turn, backend, model), so a killed run resumes with `--resume RUN` and re-does nothing.
The run also stores the problems it selected, every LLM request it made (tokens, cost, latency, cache
hits, failures) and every message it sent the model (the task, then the feedback of each turn), so a
report needs nothing but the store. Progress goes to a `Monitor` (events.py).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kbench.api import Evaluator, EvaluatorOptions, Submission, Ticket
from kbench.api.session import open_run
from kbench.config import RunConfig
from kbench.errors import ConfigError, KbenchError
from kbench.events import Monitor
from kbench.sandbox.host import Interrupted
from kbench.solutions import shipped_candidate
from kbench.store import MessageRecord, RequestRecord, Store, VerdictKey
from kbench.types import Candidate, Problem, Verdict

if TYPE_CHECKING:
    from kbench.llm.client import LLMClient
    from kbench.llm.journal import Attempt

SHIPPED_MODEL = "reference"


@dataclass(frozen=True)
class RunOutcome:
    run_id: str
    store: Path
    recorded: int  # verdicts written by this invocation
    skipped: int  # verdicts already in the store (resume)
    failed_requests: int = 0  # LLM requests that failed after retries (re-run to retry)
    failures: tuple[str, ...] = ()  # their reasons (llm/failures.py)


def solution_submissions(problems: Sequence[Problem], backends: Sequence[str]) -> list[Submission]:
    """One submission per (problem, backend) that has a shipped solution, filed as sample 0 of model
    `reference/BACKEND`."""
    found = []
    for backend in backends:
        for problem in problems:
            candidate = shipped_candidate(problem, backend)
            if candidate is not None:
                model = f"{SHIPPED_MODEL}/{backend}"
                found.append(Submission(problem, candidate.source, backend, sample=0, turn=0, model=model))
    return found


@contextmanager
def open_evaluator(
    cfg: RunConfig, problems: Sequence[Problem], resume: str | None, monitor: Monitor
) -> Iterator[Evaluator]:
    """The run's Evaluator, filing into `resume` (which must exist) or a new run with `problems` as its
    selection. An interrupted run says what it keeps, and a new run that kbench's own error stops before
    it recorded anything is removed again."""
    run_cfg = cfg if resume is None else cfg.model_copy(update={"run_id": resume})
    options = EvaluatorOptions(resume=resume is not None, activity=monitor.activity)
    ev = Evaluator(run_cfg, options)
    run_id = ev.run_id
    assert run_id is not None
    try:
        with ev:
            ev.select(problems)
            with _keeping(cfg, run_id):
                yield ev
    except KbenchError:
        if resume is None:
            with Store(cfg.store) as again:
                again.drop_run_if_empty(run_id)
        raise


class Judged:
    """Verdicts of submitted tickets as they arrive: reported to the monitor (one at a time), counted."""

    def __init__(self, monitor: Monitor) -> None:
        self.monitor = monitor
        self.recorded = 0
        self.skipped = 0
        self._lock = threading.Lock()

    def follow(self, tickets: Sequence[Ticket]) -> list[Verdict]:
        """Report each ticket's verdict as it comes (a stored one counts as skipped); wait for all; the
        verdicts in order, or the first job's own error once every job has ended."""
        for ticket in tickets:
            if ticket.stored:
                self.skipped += 1
            else:
                ticket.future.add_done_callback(functools.partial(self._arrived, ticket))
        for ticket in tickets:
            ticket.future.exception()  # waits without raising the job's error yet
        return [ticket.verdict() for ticket in tickets]

    def _arrived(self, ticket: Ticket, _: object = None) -> None:
        if ticket.future.cancelled() or ticket.future.exception() is not None:
            return
        with self._lock:
            self.recorded += 1
            self.monitor.verdict(ticket.key, ticket.verdict())


def run_solutions(
    cfg: RunConfig,
    problems: Sequence[Problem],
    backends: Sequence[str],
    resume: str | None = None,
    monitor: Monitor | None = None,
) -> RunOutcome:
    monitor = monitor or Monitor()
    submissions = solution_submissions(problems, backends)
    if not submissions:
        names = ", ".join(backends)
        raise ConfigError(
            f"no shipped {names} solution for the selected problems; see `kbench list --solutions`"
        )
    selected = [p for p in problems if any(s.problem is p for s in submissions)]
    with open_evaluator(cfg, selected, resume, monitor) as ev:
        judged = Judged(monitor)
        tickets = ev.submit_many(submissions, closed=True)
        assert ev.run_id is not None
        monitor.started(ev.run_id, len(tickets), sum(t.stored for t in tickets))
        judged.follow(tickets)
        return RunOutcome(ev.run_id, cfg.store, judged.recorded, judged.skipped)


@contextmanager
def _keeping(cfg: RunConfig, run_id: str) -> Iterator[None]:
    """An interrupted run says what it keeps: every verdict recorded before the stop, and how to resume."""
    try:
        yield
    except Interrupted as exc:
        with Store(cfg.store) as store:
            kept = len(store.done_keys(run_id))
        exc.kept = f"run {run_id} keeps {kept} verdicts; continue it with `kbench run --resume {run_id}`"
        raise


class BatchEvaluator:
    """generate.refine's `evaluate`: one turn's candidates through the run's Evaluator (each filed under
    the config's model; a stored one is given back, not judged again)."""

    def __init__(self, ev: Evaluator, problems: Sequence[Problem], monitor: Monitor) -> None:
        self.ev, self.monitor = ev, monitor
        self.problems = {p.key: p for p in problems}
        self.judged = Judged(monitor)
        self.no_codes = 0

    @property
    def recorded(self) -> int:
        return self.judged.recorded + self.no_codes

    def _submission(self, key: str, source: str, sample: int, turn: int, completion: str = "") -> Submission:
        cfg = self.ev.config
        return Submission(self.problems[key], source, cfg.backend, sample, turn, cfg.model, completion)

    def __call__(self, candidates: Sequence[Candidate]) -> list[Verdict]:
        subs = [self._submission(c.problem_key, c.source, c.sample, c.turn) for c in candidates]
        return self.judged.follow(self.ev.submit_many(subs))

    def no_code(self, attempt: Attempt) -> None:
        """refine's `on_verdict`: the evaluator's verdicts are filed already; no_code ones are filed here."""
        a = attempt
        if a.verdict is None or a.candidate is not None:
            return
        sub = self._submission(a.problem_key, "", a.sample, a.turn, a.completion.text)
        verdict = self.ev.record_no_code(sub, a.no_code_reason)
        if not a.resumed:  # a resumed attempt's verdict was filed by the run it came from
            self.no_codes += 1
            self.monitor.verdict(
                VerdictKey(a.problem_key, a.sample, a.turn, self.ev.config.backend, self.ev.config.model),
                verdict,
            )


def request_record(attempt: Attempt) -> RequestRecord:
    c = attempt.completion
    return RequestRecord(
        attempt.problem_key, attempt.sample, attempt.turn, c.cached, c.error,
        c.input_tokens, c.output_tokens, c.cost_usd, c.latency_s,
    )  # fmt: skip


def run_model(
    cfg: RunConfig,
    problems: Sequence[Problem],
    resume: str | None = None,
    monitor: Monitor | None = None,
) -> RunOutcome:
    """Generate and evaluate `cfg.turns` turns of `cfg.samples` samples per problem into a stored run.

    The LLM client is built first: a configuration error (unknown provider, missing API key) raises
    before the run exists, and one raised later by a run that recorded nothing removes the run again.
    """
    from kbench.generate import make_client

    monitor = monitor or Monitor()
    client = make_client(cfg)
    monitor.activity.client = client
    with open_evaluator(cfg, problems, resume, monitor) as ev:
        return _model_run(ev, problems, client, monitor)


@contextmanager
def open_model_run(
    cfg: RunConfig, problems: Sequence[Problem], resume: str | None
) -> Iterator[tuple[Store, str]]:
    """A run for an agent's sessions (agent/run.py), which file their own verdicts: open like
    `open_evaluator`'s, without an Evaluator."""
    store, run_id = open_run(cfg, problems, resume)
    try:
        with store, _keeping(cfg, run_id):
            yield store, run_id
    except KbenchError:
        if resume is None:
            with Store(cfg.store) as again:
                again.drop_run_if_empty(run_id)
        raise


def _model_run(ev: Evaluator, problems: Sequence[Problem], client: LLMClient, monitor: Monitor) -> RunOutcome:
    from kbench.generate import Told, refine

    cfg, run_id, store = ev.config, ev.run_id, ev.store
    assert run_id is not None and store is not None
    monitor.started(run_id, len(problems) * cfg.samples * cfg.turns, len(store.done_keys(run_id)))
    batch = BatchEvaluator(ev, problems, monitor)

    # Answers read from files (replay: not cacheable) are no requests: no tokens, cost or latency to report.
    asks_a_server = client.provider.cacheable

    def on_attempt(attempt: Attempt) -> None:
        if attempt.resumed:
            return
        if asks_a_server:
            store.record_request(run_id, request_record(attempt))
        monitor.request(attempt)
        if not attempt.final:
            monitor.lost(cfg.turns - attempt.turn)  # this sample's remaining turns are not asked

    def on_told(told: Told) -> None:
        for role, text in (("system", told.system), ("user", told.text)):
            if text:
                store.record_message(
                    run_id, MessageRecord(told.problem.key, told.sample, told.turn, role, text)
                )

    out_dir = cfg.store.parent / "generations" / run_id
    result = refine(
        problems,
        cfg,
        batch,
        out_dir,
        client,
        on_attempt=on_attempt,
        on_verdict=batch.no_code,
        on_told=on_told,
    )
    failures = tuple(a.completion.error or a.no_code_reason for a in result.failed)
    skipped = batch.judged.skipped
    return RunOutcome(run_id, cfg.store, batch.recorded, skipped, len(result.failed), failures)
