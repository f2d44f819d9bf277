"""Helpers shared by the tests of the library API, the service and the RL environment (all on the CPU)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from evalfixtures import cpu_config, fixture_source, use_builds

from kbench.config import RunConfig
from kbench.sandbox import procs

PROBLEM = "kbench:2/1"
HONEST = fixture_source("cpp_honest.py")  # ok on 2/1
WRONG = fixture_source("cpp_wrong.py")  # mismatch on 2/1, the same C++ extension: one build for both


def shared_cache(factory: pytest.TempPathFactory, builds: Path) -> Path:
    """One cache folder for the api, serve and rl tests of a session (of a parallel worker), its build
    cache the session's (`builds`, conftest.shared_builds): the C++ extension the fixtures share is built
    once (~30-80 s on 2 cores) for every test of the session, and loaded from there."""
    return use_builds(factory.getbasetemp() / "kbench-api-cache", builds)


def api_config(cache: Path, store: Path, **kw: object) -> RunConfig:
    """The CPU config of these tests: cpp, small preset, no timing unless asked (protocol checks only)."""
    return cpu_config(cache, store=store, measure=False, **kw)


def marked(source: str, mark: str) -> str:
    """`source` made unique by a comment (same extension, same build): its verdict's digest names it."""
    return f"{source}\n# {mark}\n"


def digest(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:16]


def owned_processes() -> list[str]:
    """Live processes this test process owns (workers, warm starters), as `pid cmdline`."""
    me = procs.self_ref()
    found = []
    for pid in procs.all_pids():
        info = procs.info_of(pid)
        if info is not None and info.alive and pid != me.pid and procs.owner_of(pid) == me:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            found.append(f"{pid} {cmdline[:120]}")
    return found
