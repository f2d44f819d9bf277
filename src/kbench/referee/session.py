"""Commands to the runner and its answers, under the referee's budgets (trusted).

`Session.ask` sends one command and waits for its answer, at most the phase's remaining budget. While it
waits the runner may ask for builds (`BuildRequest`): the session hands each to the referee's builder
(referee/builds.py), whose time is the build's budget, not the phase's, and answers. A runner that dies,
hangs up, answers with something malformed or answers another command than the one asked ends the job:
`crashed` (with how it ended), `timeout` (the phase that ran out), or `cheat protocol`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from kbench.referee import Stop
from kbench.referee.runner import RunnerProcess
from kbench.sandbox.channel import ChannelError
from kbench.sandbox.commands import (
    BuildAnswer,
    BuildRequest,
    Copied,
    Copy,
    Failed,
    FromRunner,
    OutputMeta,
    Ran,
    Run,
)
from kbench.types import Status

_OOM_MARKERS = ("MemoryError", "std::bad_alloc", "Cannot allocate memory", "OutOfMemoryError")


def crash_message(code: int | None) -> str:
    import signal

    if code is not None and code < 0:
        try:
            return f"the runner was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"the runner was killed by signal {-code}"
    if code is None:
        return "the runner stopped answering"
    return f"the runner exited with code {code} before answering"


class Phase:
    """The referee's clock on one phase: its budget, and the seconds spent on builds inside it (a build
    is announced to the host as phase `build`, with the build's budget, then this phase again)."""

    def __init__(self, name: str, budget_s: float, announce: Callable[[str], None] | None = None) -> None:
        self.name, self.budget_s = name, budget_s
        self.start = time.monotonic()
        self.building_s = 0.0
        self.announce = announce
        if announce is not None:
            announce(name)

    def remaining(self) -> float:
        return self.budget_s - (time.monotonic() - self.start - self.building_s)

    def expired(self) -> Stop:
        from kbench.config import PHASE_SETTINGS

        setting = PHASE_SETTINGS.get(self.name)
        named = f" ({setting})" if setting else ""
        return Stop(
            Status.TIMEOUT,
            f"{self.name} ran past its budget of {self.budget_s:.0f} s{named}; its runner was killed",
            self.name,
        )


class Session:
    def __init__(
        self,
        runner: RunnerProcess,
        build: Callable[[BuildRequest], BuildAnswer] | None,
        log_tail: Callable[[], str],
    ) -> None:
        self.runner = runner
        self.build = build
        self.log_tail = log_tail
        self.phase: Phase | None = None
        self.stamps: list[int] = []  # the last Run's clock stamps as the runner reported them (Ran.stamps)
        self.calibration: Any = None  # what a timed batch costs beyond its calls (referee/calibrate.py)

    def enter(self, phase: Phase) -> None:
        self.phase = phase

    def _died(self, why: str) -> Stop:
        code = self.runner.wait(2.0)
        if code is None:
            return Stop(Status.CRASHED, f"the runner {why}")
        tail = self.log_tail()
        if any(m in tail for m in _OOM_MARKERS):
            return Stop(Status.OOM, "the runner ran out of memory (memory limit)")
        return Stop(Status.CRASHED, crash_message(code))

    def ask(self, command: Any, expect: type, fds: list[int] | None = None) -> Any:
        """Send `command`, return its answer (an `expect`); a `Failed` answer raises Stop with its status."""
        try:
            self.runner.channel.send(command, fds)
        except ChannelError:
            raise self._died("was gone before the command") from None
        while True:
            budget = self.phase.remaining() if self.phase is not None else 600.0
            if budget <= 0:
                raise self.phase.expired() if self.phase is not None else Stop(Status.TIMEOUT, "no answer")
            try:
                answer, extra = self.runner.channel.receive(FromRunner, timeout=budget)
            except ChannelError as exc:
                if "in time" in str(exc):
                    if self.phase is not None:
                        raise self.phase.expired() from None
                    raise Stop(Status.TIMEOUT, "the runner did not answer in time") from None
                if "hung up" in str(exc) or "gone" in str(exc):
                    raise self._died("hung up") from None
                raise Stop(Status.CHEAT, f"the runner broke the protocol: {exc}", "protocol") from None
            for fd in extra:
                import os

                os.close(fd)
            if isinstance(answer, BuildRequest):
                self._build(answer)
                continue
            if isinstance(answer, Failed):
                raise Stop(Status(answer.status), answer.message, answer.rule)
            if not isinstance(answer, expect):
                raise Stop(
                    Status.CHEAT,
                    f"the runner answered {type(answer).__name__} to {type(command).__name__}",
                    "protocol",
                )
            return answer

    def _build(self, request: BuildRequest) -> None:
        if self.build is None:
            answer = BuildAnswer(ok=False, log="no builds in this job")
        else:
            t0 = time.monotonic()
            phase = self.phase
            if phase is not None and phase.announce is not None and phase.name != "build":
                phase.announce("build")
            answer = self.build(request)
            if phase is not None:
                phase.building_s += time.monotonic() - t0
                if phase.announce is not None and phase.name != "build":
                    phase.announce(phase.name)
        try:
            self.runner.channel.send(answer)
        except ChannelError:
            raise self._died("hung up during a build") from None

    # The timing loop's link (referee/timing.py)
    def run(self, calls: list[Any], mode: str, outputs: list[int], repeat: int = 0) -> list[list[OutputMeta]]:
        ran = self.ask(Run.of(calls, mode=mode, outputs=outputs, repeat=repeat), Ran)
        self.stamps = ran.stamps  # untrusted: the loop's split checks them before it records them
        return ran.per_call()

    def copy(self, outputs: list[int]) -> None:
        self.ask(Copy(outputs=outputs), Copied)
