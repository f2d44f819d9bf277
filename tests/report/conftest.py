"""Shared fixtures for report tests: one store with two fake runs (28 verdicts), built once per module."""

from __future__ import annotations

from pathlib import Path

import pytest
from report_fakes import fill_store

from kbench.store import Store


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> tuple[Store, list[str]]:
    return fill_store(Path(tmp_path_factory.mktemp("report")) / "kbench.db")
