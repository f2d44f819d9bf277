"""`kbench run`: select problems, obtain candidates, evaluate them through an executor, record, report.

This module only wires stages together. Candidates come either from the shipped hand-fused solutions
(`--solutions reference`, the main job: no API key needed) or from a model through multi-turn
refinement (generate.refine). Every verdict is written to the store the moment it arrives, keyed by
(problem, sample, turn, backend, model), so a killed run resumes with `--resume RUN` and re-does nothing.
The run also stores the problems it selected, every LLM request it made (tokens, cost, latency, cache
hits, failures) and every message it sent the model (the task, then the feedback of each turn), so a
report needs nothing but the store. Progress goes to a `Monitor` (events.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kbench.config import RunConfig
from kbench.errors import ConfigError, KbenchError
from kbench.evaluate.flow import evaluate
from kbench.evaluate.plan import evaluation_device
from kbench.evaluate.prebuild import prebuild
from kbench.evaluate.reference_pool import ReferencePool
from kbench.evaluate.shared_reference import prefetch_reference
from kbench.events import Activity, Monitor
from kbench.executors import Job, executor_options, get_executor
from kbench.sandbox.host import Interrupted
from kbench.solutions import shipped_candidate
from kbench.store import MessageRecord, RequestRecord, Store, VerdictKey, reuse
from kbench.types import BuildResult, Candidate, Problem, TimingStats, Verdict

if TYPE_CHECKING:
    from kbench.llm.client import LLMClient
    from kbench.llm.journal import Attempt

SHIPPED_MODEL = "reference"
OnVerdict = Callable[[VerdictKey, Verdict], None]


@dataclass(frozen=True)
class RunOutcome:
    run_id: str
    store: Path
    recorded: int  # verdicts written by this invocation
    skipped: int  # verdicts already in the store (resume)
    failed_requests: int = 0  # LLM requests that failed after retries (re-run to retry)
    failures: tuple[str, ...] = ()  # their reasons (llm/failures.py)


class EvaluateJob:
    """The executor's evaluation function: picklable, so the Ray executor can ship it to a worker.

    `jobs`: the batch it evaluates, when known. A problem's last job (its only one, say) shares its
    reference run with nothing, so unless the pool holds it or is running it, that job runs its own, as
    `kbench eval` does: on a GPU its candidate's worker then starts beside the reference's and the
    reference's outputs stay on the device, where the pool's shared run would write them to files and read
    them back for later candidates that never come. Other jobs (any, when the batch is not given) share one
    reference run per problem through the pool, and so does a job whose reference a lane ran ahead, while
    its build ran (`prefetch`); the pool lets a problem's entry go once its last job has ended.
    """

    def __init__(
        self,
        cfg: RunConfig,
        baselines: dict[str, dict[str, TimingStats]] | None = None,
        activity: Activity | None = None,
        jobs: Sequence[Job] | None = None,
    ) -> None:
        self.cfg = cfg
        self.baselines = baselines or {}  # problem key -> mode -> stored baseline (store.reuse)
        self.references = ReferencePool()  # one reference run per problem and device in this run
        if jobs is not None:
            self.references.expect(job.problem.key for job in jobs)
        self.activity = activity or Activity()
        self.prefetched: set[tuple[str, str]] = set()  # (problem, device) whose reference a lane ran ahead

    def _cfg(self, job: Job, device: str) -> RunConfig:
        return self.cfg.model_copy(update={"device": device, "backend": job.candidate.backend})

    def __call__(self, job: Job, device: str, built: BuildResult | None) -> Verdict:
        cfg = self._cfg(job, device)
        baselines = self.baselines.get(job.problem.key)
        key = job.problem.key
        shared = self.references.begin(key) or (key, device) in self.prefetched
        try:
            with self.activity.track("evaluations"):
                return evaluate(
                    job.problem, job.candidate, cfg, baselines, self.references if shared else None, built
                )
        finally:
            self.references.end(key)

    def prefetch(self, job: Job, device: str) -> dict[str, float] | None:
        """The executor's prefetch: the job's reference run into the pool on `device`, while its build runs.
        Marked in `prefetched` first, so the job's evaluation, should its build end meanwhile, waits for
        this run in the pool instead of starting its own (two lanes that mark one problem at once both ask
        the pool, which runs it once). The run's phases, as `prefetch_reference` returns them."""
        cfg, baselines = self._cfg(job, device), self.baselines.get(job.problem.key)
        return prefetch_reference(job.problem, cfg, self.references, baselines, self.prefetched)


class PrebuildJob:
    """The executor's build function: compile on a CPU builder (no GPU visible) into the shared cache.

    Builds dominate evaluation time (~30 s per C++ extension on a CPU, ~55 s per CUDA one), so the
    executor runs them in parallel ahead of the one-at-a-time timed lane, which then only loads them.
    """

    def __init__(self, cfg: RunConfig, batch: int = 1, activity: Activity | None = None) -> None:
        self.cfg = cfg
        self.batch = batch  # builds queued in this run: large batches make a precompiled header first
        self.activity = activity or Activity()

    def __call__(self, job: Job) -> BuildResult | None:
        backend = job.candidate.backend
        cfg = self.cfg.model_copy(update={"backend": backend})
        with self.activity.track("builds"):
            return prebuild(job.candidate, cfg, evaluation_device(cfg.device, backend), self.batch)


def solution_jobs(problems: Sequence[Problem], backends: Sequence[str]) -> list[Job]:
    """One job per (problem, backend) that has a shipped solution."""
    jobs = []
    for backend in backends:
        for problem in problems:
            candidate = shipped_candidate(problem, backend)
            if candidate is not None:
                key = VerdictKey(problem.key, 0, 0, backend, f"{SHIPPED_MODEL}/{backend}")
                jobs.append(Job(problem, candidate, tag=key))
    return jobs


def open_run(cfg: RunConfig, problems: Sequence[Problem], resume: str | None) -> tuple[Store, str]:
    from kbench.hardware import environment

    store = Store(cfg.store)
    if resume is not None:
        store.run(resume)  # StoreError naming the known runs when it does not exist
    run_id = store.start_run(cfg.model_dump(mode="json"), environment(), resume or cfg.run_id)
    store.put_problems(problems)
    store.put_run_problems(run_id, [p.key for p in problems])
    return store, run_id


def evaluate_jobs(
    jobs: Sequence[Job],
    cfg: RunConfig,
    store: Store,
    run_id: str,
    on_verdict: OnVerdict | None = None,
    activity: Activity | None = None,
) -> tuple[int, int]:
    """Evaluate jobs not yet in the store; record each verdict as it arrives. Returns (recorded, skipped)."""
    done = store.done_keys(run_id)
    pending = [job for job in jobs if job.tag not in done]
    recorded = 0

    def on_result(job: Job, verdict: Verdict) -> None:
        nonlocal recorded
        recorded += store.record(run_id, job.tag, verdict, job.candidate.source)
        store_baselines(store, job.problem, verdict)
        if on_verdict is not None:
            on_verdict(job.tag, verdict)

    # Looked up once per call: later jobs of a problem timed in this call hit the reference disk cache.
    stored = {p: reuse.baselines_for(store, p, cfg) for p in {job.problem.key for job in pending}}
    executor = get_executor(cfg.executor, **executor_options(cfg))
    activity = activity or Activity()
    build, judge = PrebuildJob(cfg, len(pending), activity), EvaluateJob(cfg, stored, activity, pending)
    executor.run(pending, build, judge, on_result, judge.prefetch)
    return recorded, len(jobs) - len(pending)


def store_baselines(store: Store, problem: Problem, verdict: Verdict) -> None:
    """Keep the reference timings a verdict measured, per hardware fingerprint and torch version."""
    fresh = [(m, s) for m, s in verdict.baselines if reuse.source_of(s) != reuse.STORED]
    import torch

    from kbench.hardware import environment, fingerprint

    # The key has no device: a cpp verdict timed on a GPU host's CPU would replace that GPU's baseline.
    if not fresh or verdict.device.split(":")[0] != environment()["device"]:
        return
    for mode, stats in fresh:
        store.put_baseline(
            problem.key, verdict.preset, verdict.dtype, mode, fingerprint(), torch.__version__, stats
        )


def run_solutions(
    cfg: RunConfig,
    problems: Sequence[Problem],
    backends: Sequence[str],
    resume: str | None = None,
    monitor: Monitor | None = None,
) -> RunOutcome:
    monitor = monitor or Monitor()
    jobs = solution_jobs(problems, backends)
    if not jobs:
        names = ", ".join(backends)
        raise ConfigError(
            f"no shipped {names} solution for the selected problems; see `kbench list --solutions`"
        )
    store, run_id = open_run(cfg, [j.problem for j in jobs], resume)
    with store, _keeping(store, run_id):
        done = store.done_keys(run_id)
        monitor.started(run_id, len(jobs), sum(job.tag in done for job in jobs))
        recorded, skipped = evaluate_jobs(jobs, cfg, store, run_id, monitor.verdict, monitor.activity)
    return RunOutcome(run_id, cfg.store, recorded, skipped)


@contextmanager
def _keeping(store: Store, run_id: str) -> Iterator[None]:
    """An interrupted run says what it keeps: every verdict recorded before the stop, and how to resume."""
    try:
        yield
    except Interrupted as exc:
        kept = len(store.done_keys(run_id))
        exc.kept = f"run {run_id} keeps {kept} verdicts; continue it with `kbench run --resume {run_id}`"
        raise


class BatchEvaluator:
    """generate.refine's `evaluate`: one turn's candidates through the executor, stored verdicts reused."""

    def __init__(
        self, cfg: RunConfig, store: Store, run_id: str, problems: Sequence[Problem], monitor: Monitor
    ) -> None:
        self.cfg, self.store, self.run_id, self.monitor = cfg, store, run_id, monitor
        self.problems = {p.key: p for p in problems}
        self.recorded = 0
        self.skipped = 0

    def key(self, candidate: Candidate) -> VerdictKey:
        return VerdictKey(
            candidate.problem_key, candidate.sample, candidate.turn, candidate.backend, self.cfg.model
        )

    def __call__(self, candidates: Sequence[Candidate]) -> list[Verdict]:
        stored = dict(self.store.verdicts(self.run_id))
        jobs = [Job(self.problems[c.problem_key], c, tag=self.key(c)) for c in candidates]
        self.skipped += sum(job.tag in stored for job in jobs)
        got: dict[VerdictKey, Verdict] = {}

        def keep(key: VerdictKey, verdict: Verdict) -> None:
            got[key] = verdict
            self.monitor.verdict(key, verdict)

        recorded, _ = evaluate_jobs(jobs, self.cfg, self.store, self.run_id, keep, self.monitor.activity)
        self.recorded += recorded
        return [got.get(job.tag) or stored[job.tag] for job in jobs]

    def no_code(self, attempt: Attempt) -> None:
        """refine's `on_verdict`: the evaluator's verdicts are stored already; no_code ones are stored here."""
        verdict, a = attempt.verdict, attempt
        if verdict is None or a.candidate is not None:
            return
        key = VerdictKey(a.problem_key, a.sample, a.turn, self.cfg.backend, self.cfg.model)
        if self.store.record(self.run_id, key, verdict, "", a.completion.text):
            self.recorded += 1
            self.monitor.verdict(key, verdict)


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
    with open_model_run(cfg, problems, resume) as (store, run_id):
        return _model_run(cfg, problems, store, run_id, client, monitor)


@contextmanager
def open_model_run(
    cfg: RunConfig, problems: Sequence[Problem], resume: str | None
) -> Iterator[tuple[Store, str]]:
    """A model's run (a new one, or `resume`), open for its verdicts: an interrupted run says what it keeps
    (`_keeping`), and a new run that kbench's own error stops before it recorded anything is removed again."""
    store, run_id = open_run(cfg, problems, resume)
    try:
        with store, _keeping(store, run_id):
            yield store, run_id
    except KbenchError:
        if resume is None:
            with Store(cfg.store) as again:
                again.drop_run_if_empty(run_id)
        raise


def _model_run(
    cfg: RunConfig,
    problems: Sequence[Problem],
    store: Store,
    run_id: str,
    client: LLMClient,
    monitor: Monitor,
) -> RunOutcome:
    from kbench.generate import Told, refine

    monitor.started(run_id, len(problems) * cfg.samples * cfg.turns, len(store.done_keys(run_id)))
    batch = BatchEvaluator(cfg, store, run_id, problems, monitor)

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
    return RunOutcome(run_id, cfg.store, batch.recorded, batch.skipped, len(result.failed), failures)
