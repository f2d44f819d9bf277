"""The shipped hand-fused solutions as candidates (`kbench run --solutions shipped`; old name: reference).

They live as package data under suite/solutions/<backend>/level<L>/<ID>_<Name>.py, one file per
problem of the embedded suite, and are evaluated like any model's candidate: same sandbox, same rules.
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

from kbench.types import Candidate, Problem

_ID_RE = re.compile(r"^(\d+)_")


def solutions_root() -> Path:
    return Path(str(resources.files("kbench") / "suite" / "solutions"))


def solution_paths(backend: str) -> dict[tuple[int, int], Path]:
    """(level, problem id) -> solution file for one backend of the embedded suite."""
    found: dict[tuple[int, int], Path] = {}
    root = solutions_root() / backend
    for level_dir in sorted(root.glob("level*")):
        level = int(level_dir.name.removeprefix("level"))
        for path in sorted(level_dir.glob("*.py")):
            m = _ID_RE.match(path.name)
            if m:
                found[(level, int(m.group(1)))] = path
    return found


def shipped_candidate(problem: Problem, backend: str) -> Candidate | None:
    if problem.source != "kbench":
        return None
    path = solution_paths(backend).get((problem.level, problem.number))
    if path is None:
        return None
    return Candidate(problem.key, backend, path.read_text(), origin=f"solutions/{backend}/{path.name}")
