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


def _cores(log: str) -> set[int]:
    found = re.search(r"cores \[([\d, ]*)\]", log)
    assert found is not None, log
    return {int(c) for c in found.group(1).split(",") if c.strip()}


def test_a_hang_holds_its_own_lane_and_lanes_run_on_their_own_cores(
    tmp_path_factory: pytest.TempPathFactory, shared_builds: Path
) -> None:
    cache = shared_cache(tmp_path_factory, shared_builds)
    store = tmp_path_factory.mktemp("lanes") / "k.db"
    with Evaluator(api_config(cache, store, cpu_lanes=2)) as ev:
        ev.evaluate(PROBLEM, marked(HONEST, "warm"))  # the build and the reference, once
        hang = ev.submit(Submission(PROBLEM, CORES + fixture_source("py_hang.py"), timeout_s=20.0))
        time.sleep(0.5)
        t0 = time.monotonic()
        honest = ev.submit(Submission(PROBLEM, CORES + marked(HONEST, "beside the hang"))).verdict()
        waited = time.monotonic() - t0
        assert honest.status is Status.OK, honest.message + honest.log_tail
        assert not hang.done() and waited < 20, waited  # judged while the hang still held the other lane
        hung = hang.verdict()
    assert hung.status is Status.TIMEOUT, hung.message
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
