"""Every anti-cheat fixture gets the verdict its header names (kbench/selftest_fixtures, see selftest.py).

CPU fixtures (cpp, and Triton under TRITON_INTERPRET=1) run in CI; cuda fixtures and `# requires: gpu`
ones are marked gpu and run on a GPU machine. All cpp fixtures share one C++ source text, so the suite
builds one extension (~30-60 s cold) and loads it from the build cache afterwards; fixtures with C++ of
their own build it against the session's precompiled header.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kbench.backends import backend_names, get_backend
from kbench.config import RunConfig
from kbench.selftest.runner import Fixture, Judges, discover

# the fixtures of every backend whose tools are installed (`Backend.version()`), as `kbench selftest` takes
# them, less its check that a plugin's package imports here: that import (Helion's ~6 s) would be paid by
# every parallel worker's collection; a package that is installed but broken fails its fixtures instead
FIXTURES = discover(gpu=True, backends=[b for b in backend_names() if get_backend(b).version() is not None])


def _param(fx: Fixture) -> object:
    marks = [pytest.mark.slow] + ([pytest.mark.gpu] if fx.requires_gpu else [])
    return pytest.param(fx, id=fx.id, marks=marks)


@pytest.fixture(scope="module")
def judges(session_cache: Path) -> Iterator[dict[bool, Judges]]:
    """The Evaluators `kbench selftest` judges by, kept open for this module's tests (of one worker): a
    fixture that needs a GPU is judged as `kbench selftest --device cuda` would, the others as on a CPU
    (each opens its Evaluators on first use). Their cache folder is the session's, as `kbench selftest`
    run by the tests would take it from KBENCH_CACHE_DIR: a library's `RunConfig()` reads no environment,
    and would build in the user's own cache, without the session's precompiled header."""
    base = RunConfig(cache_dir=session_cache)
    with Judges(gpu=False, base=base) as cpu, Judges(gpu=True, base=base) as gpu:
        yield {False: cpu, True: gpu}


@pytest.mark.parametrize("fixture", [_param(f) for f in FIXTURES])
def test_fixture_verdict(fixture: Fixture, judges: dict[bool, Judges], shared_builds: Path) -> None:
    # kbench's cache folder is the session's (conftest): its builds are `shared_builds`, whose precompiled
    # header every cpp fixture's build uses
    (outcome,) = judges[fixture.requires_gpu].judge([fixture])
    assert outcome.passed, (
        f"{fixture.id}: expected {fixture.expected}, got {outcome.got} ({outcome.message[:300]})"
    )
