"""`python -m kbench.referee JOBDIR ROLE`: one job's referee, from its start to its signed result (trusted).

Order matters. The runner is forked first, while this process holds nothing secret (referee/runner.py);
only then does the referee protect itself (not dumpable, the subreaper of whatever the runner starts:
sandbox/isolate.py), read the job's key (stdin, or the FIFO the host named) and its spec, and start the
runner's log. Then the role's job runs (referee/candidate.py, referee/reference.py); whatever ends it --
a candidate's failure, a runner that died or hung, kbench's own error -- the runner and everything it
started are ended, the lease is given up, and the result is written, signed with a key no runner ever
held.
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from pathlib import Path

from kbench import entries
from kbench.referee import Stop
from kbench.referee.runner import RunnerProcess
from kbench.sandbox import isolate, procs
from kbench.sandbox.protocol import JOB_FILE, LOG_FILE, JobSpec, read_key, write_result


def main(argv: list[str]) -> int:
    procs.bind_to_parent()  # a worker must never outlive the kbench process that started it
    jobdir, role = Path(argv[1]), argv[2]
    t0 = time.perf_counter()
    runner = RunnerProcess(entries.RUNNER_OF_ROLE[role])  # first: nothing secret is in this process yet
    isolate.protect_self()
    reaper = isolate.subreaper()
    key = read_key()
    spec = JobSpec.model_validate_json((jobdir / JOB_FILE).read_text())
    runner.start_log(jobdir / LOG_FILE)
    import torch

    # One thread for the referee's own tensor work (inputs, copies, checks): beside a runner on the same
    # CPU, a pool of threads waiting on busy cores made a 64 KiB comparison take milliseconds.
    torch.set_num_threads(1)
    from kbench.referee.job import Abort, Job

    job = Job(jobdir, spec, key, runner)
    job.result.phases["setup"] = round(time.perf_counter() - t0, 3)
    try:
        if role == "reference":
            from kbench.referee.reference import ReferenceJob

            ReferenceJob(job).run()
        else:
            from kbench.referee.candidate import CandidateJob

            CandidateJob(job).run()
    except Stop as stop:
        job.fail(stop)
    except Abort:
        pass
    except Exception as exc:  # kbench's own failure: no verdict, the host raises it
        job.result.error = (
            f"the referee failed: {type(exc).__name__}: {exc}\n" + traceback.format_exc()[-2000:]
        )
    finish(job, reaper)
    write_result(jobdir, job.result, key)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def finish(job: object, reaper: bool) -> None:
    """End the runner and everything it started; a candidate that left a process is judged for it."""
    from kbench.referee.job import Job
    from kbench.sandbox.commands import Quit

    assert isinstance(job, Job)
    left = job.runner.leftovers(frozenset(job.builder.pids)) if job.runner.poll() is None else []
    if left and job.spec.role == "candidate":
        job.result.flagged.append(
            ("child-process", f"the candidate left {len(left)} process(es) running (killed)")
        )
    try:
        job.runner.channel.send(Quit())
    except Exception:
        pass
    job.runner.wait(1.0)
    job.runner.end()
    job.give_lease()
    if job.spec.role != "reference":
        walls = job.result.confinement
        job.result.confinement = ", ".join(x for x in (walls, "subreaper" if reaper else "") if x)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
