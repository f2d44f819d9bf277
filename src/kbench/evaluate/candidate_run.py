"""The candidate's job, start to exit (host side): its job folder and spec, its environment, its device
buffers, and what its result says once read (evaluate/judge.read_worker)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from kbench.checks import kernel_names
from kbench.config import RunConfig
from kbench.evaluate.device_outputs import Receiver, layouts
from kbench.evaluate.judge import WorkerOutcome, read_worker
from kbench.evaluate.plan import Plan, job_spec, worker_preloads
from kbench.evaluate.prebuild import candidate_env
from kbench.evaluate.reference_cache import ReferenceData
from kbench.sandbox.host import REFEREE, run_worker
from kbench.types import Candidate, Problem


def run_candidate(
    problem: Problem,
    candidate: Candidate,
    cfg: RunConfig,
    plan: Plan,
    workdir: Path,
    cancel: threading.Event | None = None,
    receiver: Receiver | None = None,
    ref: ReferenceData | None = None,
    settle: bool = False,
) -> WorkerOutcome:
    """The candidate's worker, start to exit. With `receiver` its correctness outputs go into the host's
    device buffers, offered here when `ref` is known, else by the caller once it is (the worker waits).
    With `settle` (started beside the reference) it times only once the caller has settled it."""
    jobdir = workdir / "candidate"
    jobdir.mkdir(parents=True, exist_ok=True)
    path = jobdir / "candidate.py"
    path.write_text(candidate.source)
    spec = job_spec(
        problem,
        cfg,
        plan,
        role="candidate",
        backend=candidate.backend,
        candidate_file=str(path),
        kernel_names=list(kernel_names(candidate.source, candidate.backend)),
        seeds=plan.checked,
        measure=cfg.measure,
        receive=receiver is not None,
        settle=settle,
        min_kernel_share=cfg.min_kernel_share,
    )
    env = candidate_env(candidate.backend, cfg, plan.device)
    budgets = cfg.budgets("candidate")
    start = cfg.worker_start
    key = None
    if receiver is not None:
        key = receiver.key
        if ref is not None:
            receiver.offer(jobdir, layouts(ref.outputs, spec.seeds))
    preload = worker_preloads(spec)
    exit_ = run_worker(
        REFEREE, jobdir, spec, budgets, env=env, start=start, cancel=cancel, key=key, preload=preload
    )
    t0 = time.perf_counter()
    outcome = read_worker(exit_, jobdir)
    if outcome.result is not None:
        outcome.result.phases["wall"] = round(exit_.seconds, 3)
        outcome.result.phases["spawn"] = round(exit_.spawn_s, 3)
        outcome.result.phases.update(exit_.start_phases)
        outcome.result.phases["read"] = round(time.perf_counter() - t0, 3)
    if exit_.leftover and outcome.result is not None:  # escaped its referee's sweep: the host found it
        outcome.result.flagged.append(("child-process", "the candidate left a process running (killed)"))
    outcome.log_tail = exit_.log_tail
    return outcome
