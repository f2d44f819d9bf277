"""Shared test configuration: `gpu`-marked tests skip cleanly on machines without CUDA; folders shared by
the tests of one process."""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def _cost(item: pytest.Item) -> int:
    """0 for a test of an xdist group (a long chain of tests one worker runs in order), 1 for another slow
    test, 2 for the rest."""
    if item.get_closest_marker("xdist_group") is not None:
        return 0
    return 1 if item.get_closest_marker("slow") is not None else 2


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # The longest work first, in collection order otherwise (a group's tests keep theirs): pytest-xdist
    # hands tests out in this order, so the quick ones fill in at the end rather than one worker running
    # a long group alone while the other waits.
    items.sort(key=_cost)
    if _cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run on a GPU machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="module")
def short_tmp() -> Iterator[Path]:
    """A fresh folder with a short path. A unix socket's path holds at most 107 bytes, and pytest's own
    folders under parallel workers (`/tmp/pytest-of-USER/pytest-N/popen-gwN/NAME0/...`) leave Ray's
    session sockets too little room."""
    path = Path(tempfile.mkdtemp(prefix="kb-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _session_root(factory: pytest.TempPathFactory) -> Path:
    """The folder of this test session that its parallel workers share: pytest-xdist gives each worker a
    folder of its own beneath it (`pytest-N/popen-gwN`)."""
    base = factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session", autouse=True)
def session_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """kbench's cache folder for the whole session, every parallel worker included: tests that leave the
    cache folder to kbench (`kbench selftest`'s fixtures, commands run without KBENCH_CACHE_DIR) find each
    other's builds and reference runs there, as a user's commands do, and never touch the user's own."""
    cache = _session_root(tmp_path_factory) / "kbench-cache"
    cache.mkdir(exist_ok=True)
    patch = pytest.MonkeyPatch()
    patch.setenv("KBENCH_CACHE_DIR", str(cache))
    yield cache
    patch.undo()


@pytest.fixture(scope="session")
def shared_builds(session_cache: Path) -> Path:
    """The session's build cache, seeded once with the C++ extension every cpp fixture of the evaluator's
    tests shares (tests/fixtures/eval/cpp_*.py include one source) and the precompiled torch/extension.h
    for its flags, which every cpp fixture here and in kbench selftest uses (`-O3 -fopenmp`): the first
    worker to ask builds both (30-80 s on two cores) while the others wait on a file lock, and then
    everyone loads the extension, and builds other extensions against the header (about 4 s instead of
    16 s each). Tests link their own cache folders' `builds` here (evalfixtures.use_builds); a test that
    needs a cold build keeps a folder of its own."""
    from evalfixtures import cpu_config, fixture_source

    from kbench.evaluate.prebuild import prebuild
    from kbench.types import Candidate

    seeded = session_cache / "builds-seeded"
    with open(session_cache / "builds-seed.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not seeded.exists():
            honest = Candidate("kbench:2/1", "cpp", fixture_source("cpp_honest.py"))
            built = prebuild(honest, cpu_config(session_cache, precompiled_headers="on"), "cpu")
            assert built.ok, built.log
            seeded.touch()
    return session_cache / "builds"
