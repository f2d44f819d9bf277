"""Several CPU lanes (`cpu_lanes`): on real workers, a hanging candidate holds its own lane while another
candidate's verdict comes from the next, and the two evaluations' workers run on cores of their own."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest
from apifixtures import HONEST, PROBLEM, api_config, marked, shared_cache
from evalfixtures import cpu_config, fixture_source

from kbench.api import Evaluator, Submission
from kbench.errors import ConfigError
from kbench.executors.local import usable_cpus
from kbench.types import Status

pytestmark = pytest.mark.slow

# at import, the candidate's worker says which cores it may run on (its referee pinned it before)
CORES = "import os as _os, sys as _sys\nprint('cores', sorted(_os.sched_getaffinity(0)), file=_sys.stderr)\n"


SLEEPS = "import time as _time\n_time.sleep(120)\n"  # at import: in its build's worker, under the load budget


def _cores(log: str) -> set[int]:
    found = re.search(r"cores \[([\d, ]*)\]", log)
    assert found is not None, log
    return {int(c) for c in found.group(1).split(",") if c.strip()}


def test_a_hang_holds_its_own_lane_and_lanes_run_on_their_own_cores(
    tmp_path_factory: pytest.TempPathFactory, shared_builds: Path
) -> None:
    """Untimed on a 2-core machine: two lanes and two builders. A candidate that spins in its forward holds
    one lane, one whose import sleeps holds one builder; an honest candidate is built and judged beside
    both, before either ends."""
    cache = shared_cache(tmp_path_factory, shared_builds)
    store = tmp_path_factory.mktemp("lanes") / "k.db"
    with Evaluator(api_config(cache, store, cpu_lanes=2, builders=2)) as ev:
        ev.evaluate(PROBLEM, marked(HONEST, "warm"))  # the build and the reference, once
        hang = ev.submit(Submission(PROBLEM, CORES + fixture_source("py_hang.py"), timeout_s=25.0))
        sleeper = ev.submit(Submission(PROBLEM, SLEEPS + marked(HONEST, "sleeps at import"), timeout_s=25.0))
        time.sleep(1.0)
        t0 = time.monotonic()
        honest = ev.submit(Submission(PROBLEM, CORES + marked(HONEST, "beside the hang"))).verdict()
        waited = time.monotonic() - t0
        assert honest.status is Status.OK, honest.message + honest.log_tail
        # judged while the hang held the other lane and the sleeper a builder
        assert not hang.done() and not sleeper.done() and waited < 25, waited
        hung, slept = hang.verdict(), sleeper.verdict()
    assert hung.status is Status.TIMEOUT and slept.status is Status.TIMEOUT, (hung.message, slept.message)
    if len(os.sched_getaffinity(0)) >= 2:  # one core each, never the same one
        assert len(_cores(honest.log_tail)) == len(_cores(hung.log_tail)) == 1
        assert _cores(honest.log_tail).isdisjoint(_cores(hung.log_tail))


def test_timed_lanes_past_the_cores_are_refused_at_once(tmp_path: Path) -> None:
    lanes = usable_cpus() + 1
    with pytest.raises(
        ConfigError, match=f"{lanes} CPU lanes of 1 thread.* timed lanes must not share a core"
    ):
        Evaluator(cpu_config(tmp_path, store=tmp_path / "k.db", cpu_lanes=lanes))  # timed
    with Evaluator(api_config(tmp_path, tmp_path / "k.db", cpu_lanes=lanes)) as untimed:  # allowed untimed
        assert untimed.config.cpu_lanes == lanes
