"""The Evaluator as the benchmark scripts ask it for verdicts: kbench's one engine, opened the two ways
its clients open it, and the verdicts of a batch read as they come, up to a time limit.

- `one_by_one(cfg)`: `kbench eval`'s path. Each verdict runs its own reference and builds its candidate
  inside its evaluation; kept open across a script's verdicts, so the warm starter stays up between
  them as it does for a process that judges one after another (closing the last Evaluator stops it).
- `shared(cfg)`: a run's warm path. A problem's later candidates reuse its reference run.

Neither files verdicts in a store (a benchmark must not add runs to the user's), and neither reuses the
store's baselines: every verdict times its own, so its seconds and speedups do not depend on what an
earlier `kbench run` left in `cfg.store`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, wait

from kbench.api import Evaluator, EvaluatorOptions, Ticket
from kbench.config import RunConfig
from kbench.types import Verdict


def _own_baselines(cfg: RunConfig) -> RunConfig:
    return cfg.model_copy(update={"reuse_baselines": False})


def one_by_one(cfg: RunConfig) -> Evaluator:
    return Evaluator(
        _own_baselines(cfg), EvaluatorOptions(record=False, share_references=False, build_ahead=False)
    )


def shared(cfg: RunConfig, build_ahead: bool = True) -> Evaluator:
    """`build_ahead`: candidates compile on CPU builders before a lane takes them (a batch); off, inside
    their evaluation, so a verdict's seconds and build phase include the compile."""
    options = EvaluatorOptions(record=False, share_references=True, build_ahead=build_ahead)
    return Evaluator(_own_baselines(cfg), options)


def arrivals(tickets: Sequence[Ticket], deadline: float) -> Iterator[tuple[int, Ticket]]:
    """Each ticket's index and the ticket as its job ends (a verdict, or kbench's own error: `error()`).
    At `deadline` (time.monotonic) the jobs whose evaluation has not started are cancelled and left out;
    the running ones finish and come too."""
    index = {ticket.future: i for i, ticket in enumerate(tickets)}
    pending, cut = set(index), False
    while pending:
        left = None if cut else max(0.0, deadline - time.monotonic())
        done, pending = wait(pending, left, FIRST_COMPLETED)
        if not done:
            cut = True
            for future in pending:
                future.cancel()  # fails for a running job: it finishes; a cancelled one comes back done
            continue
        for future in sorted(done, key=index.__getitem__):
            if not future.cancelled():
                yield index[future], tickets[index[future]]


def verdicts(
    tickets: Sequence[Ticket], deadline: float, labels: Sequence[str]
) -> Iterator[tuple[int, Verdict]]:
    """`arrivals`' verdicts; a job that ended in kbench's own error is printed with its label, and skipped."""
    for i, ticket in arrivals(tickets, deadline):
        error = ticket.error()
        if error is not None:
            print(f"ERROR {labels[i]}: {error!r}", flush=True)
            continue
        yield i, ticket.verdict()
