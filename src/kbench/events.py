"""What a run reports while it works: its id and size first, then every verdict, request and failure.

The pipeline calls a `Monitor`; the CLI's progress display is one (cli/progress.py), and the default does
nothing, so the library runs silently. `Activity` counts what is in flight right now; the executor's
build and evaluation functions and the LLM client update it from their own threads.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from kbench.llm.client import LLMClient
    from kbench.llm.journal import Attempt
    from kbench.store import VerdictKey
    from kbench.types import Verdict

T = TypeVar("T")


@dataclass(frozen=True)
class InFlight:
    requests: int = 0  # sent to the server (retries and backoff included)
    queued: int = 0  # requests waiting for the concurrency limit
    builds: int = 0
    evaluations: int = 0


class Activity:
    """Counts of builds and evaluations under way, and the LLM client whose requests are.

    Shipped to Ray workers empty (its lock cannot travel): work done there is not counted here.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts = {"builds": 0, "evaluations": 0}
        self.client: LLMClient | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__()  # type: ignore[misc]

    @contextmanager
    def track(self, what: str) -> Iterator[None]:
        with self._lock:
            self._counts[what] += 1
        try:
            yield
        finally:
            with self._lock:
                self._counts[what] -= 1

    def run(self, what: str, fn: Callable[[], T]) -> T:
        with self.track(what):
            return fn()

    def now(self) -> InFlight:
        client = self.client
        with self._lock:
            builds, evaluations = self._counts["builds"], self._counts["evaluations"]
        if client is None:
            return InFlight(builds=builds, evaluations=evaluations)
        return InFlight(client.in_flight, client.queued, builds, evaluations)


class Monitor:
    """Receives a run's events; every method may be called from any of the run's threads."""

    def __init__(self) -> None:
        self.activity = Activity()

    def started(self, run_id: str, total: int, done: int) -> None:
        """The run exists (its id is final), `total` verdicts are expected and `done` are stored already."""

    def verdict(self, key: VerdictKey, verdict: Verdict) -> None:
        """A verdict was recorded (no_code ones included)."""

    def request(self, attempt: Attempt) -> None:
        """An LLM answer arrived, from the server or the cache, or a request failed (attempt.final False)."""

    def lost(self, count: int) -> None:
        """`count` expected verdicts will not come in this invocation (a sample's request failed)."""
