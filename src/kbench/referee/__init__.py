"""The referee: the trusted process beside every evaluation job's runner.

The host starts one referee per job (`python -m kbench.referee JOBDIR`, or forked by the warm starter).
The referee forks the runner first thing -- before it reads the job's key or its secret parts -- walls it
in (sandbox/isolate.py, sandbox/confine.py) and from then on only commands it over a socket
(sandbox/channel.py, sandbox/commands.py). Everything that decides a verdict is made here, where candidate
code cannot reach: the inputs of every call (fresh for each timed call), the clock that times calls, which
calls are checked, the copies of the checked outputs, the input-mutation check, the builds (trusted and
verified, referee/builds.py), the GPU lease, the job's result and its signature.

Modules: `main` (the entry: a job from start to signed result), `runner` (forking and walling the runner,
ending it and everything it left), `session` (commands and answers), `feed` (input and output slots),
`timing` (the timing loop), `checks` (the checked calls), `builds`, `stats`, `gpu_clock`, `candidate` and
`reference` (each role's job).
"""

from __future__ import annotations

from kbench.types import Status


class Stop(Exception):
    """Ends a job early with this status: a candidate's failure, reported as data."""

    def __init__(self, status: Status, message: str, rule: str = "") -> None:
        super().__init__(message)
        self.status, self.message, self.rule = status, message, rule
