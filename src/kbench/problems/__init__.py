"""Problems: addressing, selection and loading.

Addresses: `SOURCE:LEVEL/ID` (e.g. `kbench:2/17`, `path/to/KernelBench:1/3`, `hf:1/3`), `LEVEL/ID` (the
embedded suite), a name (`kbench:Gemm_ReLU`, `Gemm_ReLU`, `17_Gemm_ReLU`), case-insensitive, or the path
of a problem file (`path/to/17_Gemm_ReLU.py`, also written `path/to/17_Gemm_ReLU.py:`).
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from kbench.errors import ProblemError
from kbench.problems.loader import LoadedProblem, build_model, load
from kbench.problems.sources import check_unique, load_source, parse_spec
from kbench.types import Problem

__all__ = ["LoadedProblem", "build_model", "get_problem", "load", "select", "source_problems"]

_ID_RE = re.compile(r"^(\d+)/(\d+)$")


@lru_cache(maxsize=32)
def _cached(spec: str) -> tuple[Problem, ...]:
    return tuple(load_source(spec))


def source_problems(spec: str = "kbench") -> list[Problem]:
    parse_spec(spec)  # validates the spec before the cache sees it
    return list(_cached(spec))


def _split(address: str) -> tuple[str, str]:
    if address.endswith(".py") and Path(address).expanduser().is_file():
        return address, ""  # a problem file, whatever characters its path holds
    if ":" in address:
        spec, _, rest = address.rpartition(":")
        return spec, rest
    return "kbench", address


def get_problem(address: str, source: str | None = None) -> Problem:
    """Resolve one address to a Problem, or raise ProblemError naming what was asked for."""
    spec, rest = _split(address)
    if source is not None and ":" not in address and spec != address:
        spec = source
    problems = source_problems(spec)
    if len(problems) == 1 and rest in ("", "0/0", problems[0].name):
        return problems[0]
    m = _ID_RE.match(rest)
    if m:
        level, number = int(m.group(1)), int(m.group(2))
        for p in problems:
            if p.level == level and p.number == number:
                return p
        raise ProblemError(f"{address}: no problem {level}/{number} in source {spec!r}")
    wanted = rest.lower().removesuffix(".py")
    hits = [p for p in problems if wanted in (p.name.lower(), f"{p.number}_{p.name}".lower())]
    if len(hits) == 1:
        return hits[0]
    if len(hits) > 1:
        keys = ", ".join(p.key for p in hits)
        raise ProblemError(f"{address}: ambiguous name, matches {keys}; use LEVEL/ID")
    raise ProblemError(f"{address}: no problem named {rest!r} in source {spec!r}")


def select(
    source: str = "kbench",
    level: int | None = None,
    tags: list[str] | None = None,
    ids: list[str] | None = None,
    limit: int | None = None,
) -> list[Problem]:
    """Problems of a source filtered by level, tags (all must match) and explicit addresses."""
    if ids:  # addresses may name problems of several sources: none may share another's level and number
        chosen = [get_problem(i, source) for i in ids]
        check_unique(chosen)
    else:
        chosen = source_problems(source)
    if level is not None:
        chosen = [p for p in chosen if p.level == level]
    for tag in tags or []:
        chosen = [p for p in chosen if tag in p.tags]
    return chosen[:limit] if limit else chosen
