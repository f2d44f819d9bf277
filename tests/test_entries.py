"""The modules kbench runs as processes (kbench/entries.py) and those its warm starter preloads exist and
run: a renamed module fails here, not as a worker that never starts."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from kbench import entries
from kbench.sandbox import zygote


def _source(module: str) -> str:
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None, module
    path = Path(spec.origin)
    if spec.submodule_search_locations:  # a package runs its __main__
        path = path.parent / "__main__.py"
    assert path.is_file(), f"{module} has nothing to run as `python -m {module}`"
    return path.read_text()


@pytest.mark.parametrize("module", entries.ALL)
def test_every_entry_is_a_module_that_runs_as_main(module: str) -> None:
    assert 'if __name__ == "__main__"' in _source(module), module


def test_a_referee_forks_the_runner_of_its_role() -> None:
    assert set(entries.RUNNER_OF_ROLE) == {"candidate", "build", "reference"}
    assert set(entries.RUNNER_OF_ROLE.values()) <= set(entries.ALL)


@pytest.mark.parametrize("module", [m for m in zygote.PRELOAD if m.startswith("kbench")])
def test_every_module_the_starter_preloads_is_found(module: str) -> None:
    assert importlib.util.find_spec(module) is not None, module
