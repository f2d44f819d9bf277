"""One fixture format: the anti-cheat fixtures and the evaluator's test fixtures carry the same header."""

from __future__ import annotations

from pathlib import Path

import pytest
from evalfixtures import FIXTURES

from kbench.selftest.runner import discover, expectations, parse_header
from kbench.types import Status

EVAL_FIXTURES = sorted(p for p in FIXTURES.glob("*.py") if not p.name.startswith("_"))


@pytest.mark.parametrize("path", EVAL_FIXTURES, ids=lambda p: p.name)
def test_every_eval_fixture_names_a_verdict(path: Path) -> None:
    head = parse_header(path.read_text(), str(path))
    for e in expectations(head["expect"]):
        Status(e.status)  # a known status
    include = head.get("include")
    assert include is None or (FIXTURES / include).is_file()


def test_every_selftest_fixture_names_a_verdict() -> None:
    fixtures = discover(gpu=True)
    assert fixtures
    for fx in fixtures:
        for e in fx.expect:
            Status(e.status)
