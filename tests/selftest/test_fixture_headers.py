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


def test_a_fixture_with_an_include_header_is_that_file_then_its_own_text(tmp_path: Path) -> None:
    from kbench.errors import ConfigError
    from kbench.selftest.runner import fixture_text

    (tmp_path / "_shared.py").write_text("SHARED = 1\n")
    fixture = tmp_path / "alias.cpp.py"
    fixture.write_text("# expect: cheat output-aliases-input\n# include: _shared.py\nOWN = SHARED\n")
    assert fixture_text(fixture) == "SHARED = 1\n\n" + fixture.read_text()
    plain = tmp_path / "plain.cpp.py"
    plain.write_text("# expect: ok\nOWN = 1\n")
    assert fixture_text(plain) == plain.read_text()
    for wrong in ("_missing.py", "../_shared.py"):
        fixture.write_text(f"# expect: ok\n# include: {wrong}\n")
        with pytest.raises(ConfigError, match="names no file beside it"):
            fixture_text(fixture)
