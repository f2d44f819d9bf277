"""Every anti-cheat fixture gets the verdict its header names (kbench/selftest_fixtures, see selftest.py).

CPU fixtures (cpp, and Triton under TRITON_INTERPRET=1) run in CI; cuda fixtures and `# requires: gpu`
ones are marked gpu and run on a GPU machine. All cpp fixtures share one C++ source text, so the suite
builds one extension (~30-60 s cold) and loads it from the build cache afterwards; fixtures with C++ of
their own build it against the session's precompiled header.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kbench.selftest.runner import Fixture, discover, run_fixture

FIXTURES = discover(gpu=True)


def _param(fx: Fixture) -> object:
    marks = [pytest.mark.slow] + ([pytest.mark.gpu] if fx.requires_gpu else [])
    return pytest.param(fx, id=fx.id, marks=marks)


@pytest.mark.parametrize("fixture", [_param(f) for f in FIXTURES])
def test_fixture_verdict(fixture: Fixture, shared_builds: Path) -> None:
    # kbench's cache folder is the session's (conftest): its builds are `shared_builds`, whose precompiled
    # header every cpp fixture's build uses
    outcome = run_fixture(fixture, gpu=fixture.requires_gpu)
    assert outcome.passed, (
        f"{fixture.id}: expected {fixture.expected}, got {outcome.got} ({outcome.message[:300]})"
    )
