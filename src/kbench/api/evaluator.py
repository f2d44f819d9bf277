"""`Evaluator`: kbench's evaluator opened once and kept warm, for loops that ask for thousands of verdicts.

    from kbench.api import Evaluator

    with Evaluator(device="cpu", backend="cpp", preset="small") as ev:
        verdict = ev.evaluate("2/1", source)              # blocks; the same Verdict `kbench eval` gives
        verdict = await ev.aevaluate("2/1", source)       # from asyncio code
        verdicts = ev.evaluate_many([Submission("2/1", a), Submission("2/23", b)])

The Evaluator is kbench's one engine: `kbench run`, `kbench eval`, the service, the RL environment and
the MCP tools are its clients. Every submission goes through an executor (api/lanes.py): locally,
candidates are built ahead on CPU builders and each GPU's lanes take turns on the device lease, so
concurrent callers (threads, an event loop, the HTTP service) share the machine as one batch would; on
Ray (`executor="ray"`), each batch of submissions runs on the cluster's lanes. What stays warm between
calls: the reference runs of each problem (`ReferencePool`: a problem's second candidate skips the
reference worker; bounded in bytes), the content-addressed build cache (on disk), and the warm starter
that forks workers (~0.03 s instead of ~2 s per worker). Each verdict is filed in one run of the results
database (api/session.py), so `kbench report RUN` works on it.

Closing ends the Evaluator's workers: queued jobs are cancelled, running ones finish (or, with
`close(cancel=True)`, are dropped without a verdict), and the last open Evaluator of the process ends
every worker the warm starter forked. A starter left idle stays for the process's next Evaluator (its
first verdict then skips the starter's torch import) and ends with the process; one with a worker still
running, or every one on `close(cancel=True)`, ends now with its workers. Importing this module does
not import torch, so a command can start the warm starter (`prewarm`) before its own imports.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kbench.api.jobs import EvaluatorClosed, EvaluatorStats, JobState, KeyConflict, Submission, Ticket
from kbench.api.lanes import Lanes
from kbench.api.runner import Runner, Stages
from kbench.api.session import Session
from kbench.config import RunConfig
from kbench.errors import ConfigError
from kbench.events import Activity
from kbench.executors import Job, is_streaming
from kbench.executors.local import cpu_lane_count
from kbench.store import Store, VerdictKey
from kbench.types import Candidate, Problem, Status, Verdict


def prewarm(cfg: RunConfig, one_shot: bool = False) -> None:
    """Start the warm starter now, in the background, so its torch import overlaps the caller's set-up.
    Its start-up environment is the backend's (Triton on a machine without a GPU runs interpreted, which
    its starter must know when it imports).
    `one_shot`: the caller asks for one verdict and exits (`kbench eval`): nothing optional is preloaded."""
    from kbench.backends import startup_env
    from kbench.sandbox.starter import import_torch_meanwhile
    from kbench.sandbox.starter import prewarm as start

    if cfg.worker_start != "spawn":
        start(startup_env(cfg.backend, cfg.device), one_shot=one_shot)
    import_torch_meanwhile()  # after the starter's launch (see there); once per process


@dataclass(frozen=True)
class EvaluatorOptions:
    """How an Evaluator runs, beyond the RunConfig.

    `record`: file every verdict in `cfg.store` as one run (`cfg.run_id` continues that run). Without it
    the store is only read for stored baselines. `share_references`: keep each problem's reference run
    for its later candidates (the warm path); off, every evaluation runs its own reference, which on a GPU
    lets the candidate's worker start beside it (kbench eval's cold path). `build_ahead`: compile on CPU
    builders before a lane takes the job; off, the build runs inside the evaluation beside the reference
    run (the shortest path for a single cold candidate). `devices`: the GPU lanes (default: every GPU
    `cfg.device` names). `reference_bytes`: the most reference outputs kept (default: a quarter of the
    available memory, at least 8 GiB).
    """

    record: bool = True
    share_references: bool = True
    build_ahead: bool = True
    devices: tuple[str, ...] = ()
    reference_bytes: int | None = None
    # only problems of the config's source, by LEVEL/ID or name, never a path: for problem addresses that
    # come from clients (the service); a problem's code is trusted and runs unconfined in the reference
    sources_only: bool = False
    resume: bool = False  # `cfg.run_id` names a stored run to continue (StoreError naming the runs if not)
    activity: Activity | None = field(default=None, compare=False)  # counts of builds and evaluations


def _config(config: RunConfig | None, overrides: dict[str, Any]) -> RunConfig:
    from pydantic import ValidationError

    from kbench.config import resolve

    if config is None:
        return resolve(None, overrides)  # defaults < KBENCH_* environment < overrides
    try:
        return RunConfig(**(config.model_dump() | overrides))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        raise ConfigError(f"bad config value for '{where}': {first['msg']}") from None


class Evaluator:
    """Open once, evaluate many times, close (or use `with`). Thread-safe; see the module docstring."""

    _lanes: Lanes
    _open = 0  # Evaluators open in this process: the last one to close ends their workers
    _open_lock = threading.Lock()

    def __init__(
        self, config: RunConfig | None = None, options: EvaluatorOptions | None = None, **overrides: Any
    ) -> None:
        self.config = _config(config, overrides)
        is_streaming(self.config.executor)  # ConfigError naming the executors for an unknown one
        if self.config.executor == "local":  # refused now, not at the first submission
            cpu_lane_count(self.config.cpu_lanes, self.config.cpu_threads, self.config.measure)
        self.options = options or EvaluatorOptions()
        prewarm(self.config)
        from kbench.evaluate.reference_pool import ReferencePool

        self.session = Session(self.config, self.options.record, self.options.resume)
        share = self.options.share_references
        self.references = ReferencePool(self.options.reference_bytes) if share else None
        self.activity = self.options.activity or Activity()
        self._lock = threading.Lock()
        self._closed = False
        self._by_key: dict[VerdictKey, Ticket] = {}  # in flight, by key: a resubmission joins its job
        self._counts = {"finished": 0, "failed": 0}
        self._devices: dict[str, str] = {}  # backend -> device spec, its environment checked
        stages = Stages(self.config, self.references, self.options.build_ahead, self.activity)
        self._lanes = Lanes(self.config, Runner(stages, self.session, self._queued), self.options.devices)
        with Evaluator._open_lock:
            Evaluator._open += 1

    def __deepcopy__(self, memo: dict[int, Any]) -> Evaluator:
        """Itself: an Evaluator is a handle on workers, lanes and a store, shared by whatever holds it (a
        deep copy of a gymnasium env spec whose kwargs name one keeps that one, as a copy of a file handle
        would not make a second file)."""
        return self

    # public API ----------------------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def run_id(self) -> str | None:
        """The run this Evaluator files its verdicts in (None without recording)."""
        return self.session.run_id

    @property
    def store(self) -> Store | None:
        """The results database this Evaluator files into (None without recording)."""
        return self.session.store if self.session.recording else None

    def select(self, problems: Iterable[Problem]) -> None:
        """File `problems` as the run's selection (`kbench run`'s): its report lists them, judged or not."""
        self.session.select(list(problems))

    def problem(self, address: str | Problem, strict: bool = False) -> Problem:
        """Resolve a problem address in the config's source (ProblemError naming what was asked for);
        with `strict` (or `sources_only`), only a problem of that source, never a path."""
        if isinstance(address, Problem):
            return address
        from kbench.problems import find_problems, get_problem
        from kbench.problems.sources import parse_file_key

        if parse_file_key(address) is not None and self.config.source:
            # a stored key of a problem file (a job requeued after a restart): found by its content among
            # the config's own source (a file or a folder), never elsewhere
            found, _ = find_problems([address], [self.config.source], {})
            if found:
                return found[0]
        return get_problem(address, self.config.source, strict or self.options.sources_only)

    def next_sample(
        self, problem: str | Problem, backend: str | None = None, model: str | None = None
    ) -> int:
        """Reserve the next free sample number of (problem, backend, model) in this run (an episode's)."""
        key = self.problem(problem).key
        return self.session.reserve(key, backend or self.config.backend, self.session.model(model))

    def submit(self, submission: Submission) -> Ticket:
        """Queue one candidate; returns at once. Our misconfiguration (unknown problem, backend or preset,
        a backend this machine cannot run) raises here; a resubmitted key joins the job in flight or
        returns the stored verdict (ConfigError when it holds a different source)."""
        return self.submit_many([submission])[0]

    def submit_many(self, submissions: Iterable[Submission], closed: bool = False) -> list[Ticket]:
        """Queue candidates together (an executor that takes batches, Ray, gets them as one). Every one is
        checked before any is queued: a misconfigured one raises and queues nothing.

        `closed`: no later submission for these problems comes to this Evaluator (a run's whole batch):
        each problem's reference outputs leave the pool once its last job has ended, and a problem's only
        job runs its own reference (on a GPU its outputs then stay on the device)."""
        self._check_open()
        made = [self._ticket(s) for s in submissions]
        if closed and self.references is not None:
            self.references.expect(ticket.problem.key for ticket in made)
        tickets, queued = [], []
        with self._lock:
            self._check_open()
            for ticket in made:
                joined = self._join(ticket, explicit=ticket.submission.sample is not None)
                if joined is not None:
                    if closed and self.references is not None:
                        self.references.unexpect(ticket.problem.key)
                    tickets.append(joined)
                    continue
                self._by_key[ticket.key] = ticket
                ticket.future.add_done_callback(functools.partial(self._forget, ticket))
                queued.append(ticket)
                tickets.append(ticket)
            by_spec: dict[str, list[Job]] = {}
            for ticket in queued:
                job = Job(ticket.problem, ticket.candidate, tag=ticket, priority=ticket.submission.priority)
                by_spec.setdefault(ticket.device, []).append(job)
            for spec, jobs in by_spec.items():
                self._lanes.put(spec, jobs)  # under the lock: close waits
        return tickets

    def _ticket(self, submission: Submission) -> Ticket:
        problem = self.problem(submission.problem)
        backend = submission.backend or self.config.backend
        spec = self._device_for(backend)
        from kbench.problems.loader import check_preset

        check_preset([problem], self.config.preset)  # ProblemError for a mistyped preset
        model = self.session.model(submission.model)
        key = self.session.key(problem.key, backend, model, submission.sample, submission.turn)
        candidate = Candidate(problem.key, backend, submission.source, model, key.sample, key.turn)
        return Ticket(key, problem, candidate, submission, spec)

    def evaluate(
        self,
        problem: str | Problem,
        source: str,
        backend: str | None = None,
        *,
        sample: int | None = None,
        turn: int = 0,
        timeout: float | None = None,
    ) -> Verdict:
        """One verdict, waiting for it (TimeoutError after `timeout` s; the job goes on)."""
        return self.submit(Submission(problem, source, backend, sample, turn)).verdict(timeout)

    async def aevaluate(
        self,
        problem: str | Problem,
        source: str,
        backend: str | None = None,
        *,
        sample: int | None = None,
        turn: int = 0,
    ) -> Verdict:
        """`evaluate` for asyncio code: the event loop runs on while the job is judged. Cancelling the
        awaiting task cancels the job if it has not started."""
        submission = Submission(problem, source, backend, sample, turn)
        ticket = await asyncio.to_thread(self.submit, submission)
        return await asyncio.wrap_future(ticket.future)

    def evaluate_many(self, submissions: Iterable[Submission], timeout: float | None = None) -> list[Verdict]:
        """Verdicts in the order given, the whole batch queued at once (builds run in parallel). Raises
        the first job's error after every job has ended; use `submit_many` to handle errors per job."""
        tickets = self.submit_many(submissions)
        for ticket in tickets:
            ticket.future.exception(timeout)  # waits without raising the job's error yet
        return [ticket.verdict() for ticket in tickets]

    def record_no_code(self, submission: Submission, reason: str) -> Verdict:
        """File a `no_code` verdict: the model's answer held no usable candidate (extract.py said why)."""
        self._check_open()
        problem = self.problem(submission.problem)
        backend = submission.backend or self.config.backend
        model = self.session.model(submission.model)
        key = self.session.key(problem.key, backend, model, submission.sample, submission.turn)
        cfg = self.config
        verdict = Verdict(Status.NO_CODE, problem.key, backend, cfg.preset, cfg.dtype, cfg.device, reason)
        self.session.record(key, problem, verdict, "", submission.completion)
        return verdict

    def stats(self) -> EvaluatorStats:
        with self._lock:
            phases = [t.phase for t in self._by_key.values() if not t.done()]
            counts = dict(self._counts)
        pool = self.references
        return EvaluatorStats(
            run_id=self.run_id,
            queued=phases.count(JobState.QUEUED),
            building=phases.count(JobState.BUILDING),
            ready=phases.count(JobState.READY),
            running=phases.count(JobState.RUNNING),
            finished=counts["finished"],
            failed=counts["failed"],
            reference_runs=pool.runs if pool is not None else 0,
            reference_reuses=pool.reuses if pool is not None else 0,
            reference_bytes=pool.held_bytes() if pool is not None else 0,
        )

    def close(self, cancel: bool = False) -> None:
        """Cancel queued jobs, let running ones finish (`cancel=True`: drop them, no verdict), end the
        workers, close the store. Safe to call twice."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            tickets = list(self._by_key.values())
        for ticket in tickets:
            if not ticket.future.cancel() and cancel:
                ticket.abandoned = True
        last = self._release()
        if cancel and last:
            # the running jobs' workers die now; their tickets fail as abandoned
            self._end_workers(everything=True)
        self._lanes.close()
        self.session.close()
        if last:
            self._end_workers(everything=False)

    def __enter__(self) -> Evaluator:
        return self

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        # leaving on an error (a signal's Interrupted) does not wait for running jobs
        self.close(cancel=kind is not None)

    # internals ---------------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise EvaluatorClosed("this Evaluator is closed; open a new one")

    def _device_for(self, backend: str) -> str:
        """The device spec of `backend`'s lanes; the backend's environment is checked on first use."""
        spec = self._devices.get(backend)
        if spec is None:
            from kbench.backends import get_backend
            from kbench.evaluate.plan import evaluation_device

            spec = evaluation_device(self.config.device, backend)
            get_backend(backend).check_environment(spec)  # ConfigError that says how to fix it
            self._devices[backend] = spec
        return spec

    def _join(self, ticket: Ticket, explicit: bool) -> Ticket | None:
        """The ticket a resubmitted key resolves to: the one in flight, or one holding the stored verdict."""
        running = self._by_key.get(ticket.key)
        stored = self.session.find(ticket.key) if explicit and running is None else None
        if running is not None:
            held = running.candidate.source
        elif stored is not None:
            held = stored.candidate_source
        else:
            return None
        if held != ticket.candidate.source:
            k = ticket.key
            raise KeyConflict(
                f"{k.problem_key} sample {k.sample} turn {k.turn} ({k.backend}, model {k.model}) holds another "
                f"candidate in run {self.run_id}; submit this one under another sample or turn"
            )
        if running is not None:
            return running
        assert stored is not None
        ticket.stored = True
        ticket.finish(stored.verdict)
        return ticket

    def _forget(self, ticket: Ticket, _: object = None) -> None:
        with self._lock:
            if self._by_key.get(ticket.key) is ticket:
                del self._by_key[ticket.key]
            if not ticket.future.cancelled():
                self._counts["failed" if ticket.future.exception() else "finished"] += 1

    def _queued(self) -> int:
        """Jobs submitted and not on a builder yet (the build's batch size, evaluate/prebuild.py). Not
        the lanes' feeds: the local executor takes each job from its feed as soon as it comes."""
        with self._lock:
            return sum(t.phase is JobState.QUEUED and not t.done() for t in self._by_key.values())

    def _release(self) -> bool:
        with Evaluator._open_lock:
            Evaluator._open -= 1
            return Evaluator._open == 0

    @staticmethod
    def _end_workers(everything: bool) -> None:
        """End every worker of the process's starters; `everything`: the starters too, idle ones included."""
        from kbench.sandbox import starter

        if everything:
            starter.kill_all()
        else:
            starter.end_workers()
