"""The live view of `kbench run`: the header with the run id first, one line per verdict and per failed
request, and a bar with the known total, the ETA and what is in flight (requests, builds, evaluations).

It is a `Monitor` (events.py): the pipeline calls it from its threads, and rich draws the bar on stderr.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from types import TracebackType

from rich.console import RenderableType
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from kbench import metrics as m
from kbench.cli.app import err_console
from kbench.config import NOISE_FLOOR
from kbench.events import Monitor
from kbench.llm.journal import Attempt
from kbench.prompts.feedback import reason
from kbench.store import VerdictKey
from kbench.types import Verdict

# (run id, total, done, whether the LLM client has a response cache or None without one) -> the header
Header = Callable[[str, int, int, bool | None], str]


def speedup_text(v: Verdict, mode: str, floor: float = NOISE_FLOOR) -> str | None:
    """`1.35x eager`, `(fast)` when fast at 1, and an uncertain one explained where it is shown: its 95 %
    interval, widened by the noise floor, holds 1x, so it counts as not fast (metrics.classify)."""
    s = m.speedup(v, mode)
    if s is None:
        return None
    kind = m.classify(v, 1.0, mode, floor)
    if kind == "uncertain":
        low, high = s.low / (1 + floor), s.high * (1 + floor)
        return f"{s.value:6.2f}x {mode} (uncertain: 95 % interval {low:.2f}-{high:.2f}x holds 1x; not fast)"
    return f"{s.value:6.2f}x {mode}" + (" (fast)" if kind == "fast" else "")


def verdict_line(key: VerdictKey, v: Verdict, floor: float = NOISE_FLOOR) -> str:
    """One verdict: problem, backend, sample/turn, status, speedups (fast at 1 or uncertain), rule, message."""
    parts = [
        f"{key.problem_key:<14}",
        f"{key.backend:<6}",
        f"s{key.sample}t{key.turn}",
        f"{v.status.value:<13}",
    ]
    for mode in ("eager", "compile"):
        if text := speedup_text(v, mode, floor):
            parts.append(text)
    if v.generalizes is not None:
        parts.append("generalizes" if v.generalizes else "does not generalize")
    if v.rule:
        parts.append(f"[{v.rule}]")
    why = reason(v)
    if why:
        parts.append(why[:120])
    return "  ".join(parts)


class _Bar(Progress):
    """The bar, and under it what is in flight (re-read at every refresh, 10 times a second)."""

    def __init__(self, view: RunProgress) -> None:
        self.view = view  # read while the base class builds its display
        super().__init__(
            TextColumn("{task.description}"),
            BarColumn(bar_width=30),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=err_console,
        )

    def get_renderables(self) -> Iterable[RenderableType]:
        yield self.make_tasks_table(self.tasks)
        yield Text(self.view.activity_line(), style="dim")


class RunProgress(Monitor):
    def __init__(self, header: Header, floor: float = NOISE_FLOOR) -> None:
        super().__init__()
        self.header, self.floor = header, floor
        self.failed = 0
        self.uncertain = 0  # speedups shown as uncertain: the run's closing lines explain them
        self._lock = threading.Lock()
        self._task: TaskID | None = None
        self.bar = _Bar(self)

    def __enter__(self) -> RunProgress:
        self.bar.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.bar.stop()

    def print(self, text: str, markup: bool = False) -> None:
        self.bar.console.print(text, highlight=False, soft_wrap=True, markup=markup)

    def activity_line(self) -> str:
        now = self.activity.now()
        client = self.activity.client
        parts = []
        if client is not None:
            queued = f", {now.queued} queued" if now.queued else ""
            parts.append(f"requests {now.requests} in flight{queued}")
            parts.append(f"cache hits {client.usage.cached}")
        if self.failed:
            parts.append(f"failed requests {self.failed}")
        parts += [f"builds {now.builds}", f"evaluating {now.evaluations}"]
        return " · ".join(parts)

    def started(self, run_id: str, total: int, done: int) -> None:
        client = self.activity.client
        self.print(self.header(run_id, total, done, None if client is None else client.cache is not None))
        with self._lock:
            self._task = self.bar.add_task("verdicts", total=total, completed=done)

    def verdict(self, key: VerdictKey, verdict: Verdict) -> None:
        self.print(verdict_line(key, verdict, self.floor))
        with self._lock:
            modes = ("eager", "compile")
            self.uncertain += sum(m.classify(verdict, 1.0, mode, self.floor) == "uncertain" for mode in modes)
            if self._task is not None:
                self.bar.advance(self._task)

    def request(self, attempt: Attempt) -> None:
        if attempt.final:
            return
        with self._lock:
            self.failed += 1
        reason = escape(attempt.completion.error or attempt.no_code_reason)
        self.print(
            f"[yellow]request failed[/] {attempt.problem_key} s{attempt.sample}t{attempt.turn}: {reason} "
            "(this sample stops here; --resume asks again)",
            markup=True,
        )

    def lost(self, count: int) -> None:
        with self._lock:
            task = next((t for t in self.bar.tasks if t.id == self._task), None)
            if task is not None:
                self.bar.update(task.id, total=max(0, (task.total or 0) - count))
