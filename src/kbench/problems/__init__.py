"""Problems: addressing, selection and loading.

Addresses: `SOURCE:LEVEL/ID` (e.g. `kbench:2/17`, `path/to/KernelBench:1/3`, `hf:1/3`), `LEVEL/ID` (the
embedded suite), a name (`kbench:Gemm_ReLU`, `Gemm_ReLU`, `17_Gemm_ReLU`), case-insensitive, or the path
of a problem file (`path/to/17_Gemm_ReLU.py`, also written `path/to/17_Gemm_ReLU.py:`).
"""

from __future__ import annotations

import difflib
import re
from functools import lru_cache
from pathlib import Path

from kbench.errors import ProblemError
from kbench.problems.loader import LoadedProblem, build_model, load
from kbench.problems.sources import check_unique, load_source, parse_spec
from kbench.types import Problem

__all__ = [
    "LoadedProblem",
    "build_model",
    "check_in_source",
    "get_problem",
    "load",
    "select",
    "source_problems",
]

_ID_RE = re.compile(r"^(\d+)/(\d+)$")


@lru_cache(maxsize=32)
def _cached(spec: str, stamp: tuple[tuple[str, int, int], ...]) -> tuple[Problem, ...]:
    return tuple(load_source(spec))


def _stamp(kind: str, path: str) -> tuple[tuple[str, int, int], ...]:
    """What a file or folder source's problems depend on: each .py file's path, size and change time."""
    files = [Path(path)] if kind == "file" else sorted(Path(path).rglob("*.py")) if kind == "dir" else []
    stamps = []
    for f in files:
        try:
            st = f.stat()
        except OSError:
            continue
        stamps.append((str(f), st.st_size, st.st_mtime_ns))
    return tuple(stamps)


def source_problems(spec: str = "kbench") -> list[Problem]:
    """The problems of a source, cached by what they were read from: a file or folder by its absolute
    path and its files' sizes and change times, so neither another working folder nor an edit sees stale ones."""
    parsed = parse_spec(spec)  # validates the spec before the cache sees it
    if parsed.kind in ("file", "dir"):
        return list(_cached(parsed.arg, _stamp(parsed.kind, parsed.arg)))
    return list(_cached(spec, ()))


def _split(address: str) -> tuple[str, str]:
    if address.endswith(".py") and Path(address).expanduser().is_file():
        return address, ""  # a problem file, whatever characters its path holds
    if ":" in address:
        spec, _, rest = address.rpartition(":")
        return spec, rest
    return "kbench", address


def check_in_source(address: str, source: str) -> None:
    """ProblemError unless `address` names a problem of `source` by LEVEL/ID or name: no file or folder
    of this machine (a problem's code is trusted and run unconfined by the reference), no other source."""
    spec, sep, rest = address.rpartition(":")
    where = f"this service evaluates problems of source {source!r} only, by LEVEL/ID or name (see GET /v1/problems)"
    if sep and spec != source:
        raise ProblemError(f"problem {address!r}: {where}")
    name = rest if sep else address
    if _ID_RE.match(name):
        return
    if (
        not name
        or ".." in name
        or "/" in name
        or "\\" in name
        or name.endswith(".py")
        or name.startswith("~")
    ):
        raise ProblemError(f"problem {address!r}: a path is not a problem here; {where}")


def get_problem(address: str, source: str | None = None, strict: bool = False) -> Problem:
    """Resolve one address to a Problem, or raise ProblemError naming what was asked for. `strict` (the
    service, the RL environment): only problems of `source`, never a file, a folder or another source."""
    if strict:
        check_in_source(address, source or "kbench")
        spec, rest = source or "kbench", address.rpartition(":")[2]
        return _resolve(address, spec, rest)
    spec, rest = _split(address)
    if source is not None and ":" not in address and spec != address:
        spec = source
    return _resolve(address, spec, rest)


def _resolve(address: str, spec: str, rest: str) -> Problem:
    problems = source_problems(spec)
    if len(problems) == 1 and rest in ("", "0/0", problems[0].name):
        return problems[0]
    m = _ID_RE.match(rest)
    if m:
        level, number = int(m.group(1)), int(m.group(2))
        for p in problems:
            if p.level == level and p.number == number:
                return p
        raise ProblemError(
            f"{address}: no problem {level}/{number} in source {spec!r}; {_nearest_ids(problems, level, spec)}"
        )
    wanted = rest.lower().removesuffix(".py")
    hits = [p for p in problems if wanted in (p.name.lower(), f"{p.number}_{p.name}".lower())]
    if len(hits) == 1:
        return hits[0]
    if len(hits) > 1:
        keys = ", ".join(p.key for p in hits)
        raise ProblemError(f"{address}: ambiguous name, matches {keys}; use LEVEL/ID")
    raise ProblemError(
        f"{address}: no problem named {rest!r} in source {spec!r}; {_nearest_names(problems, rest, spec)}"
    )


def _list_hint(spec: str, level: int | None = None) -> str:
    source = "" if spec == "kbench" else f" --source {spec}"
    return f"`kbench list{source}{'' if level is None else f' --level {level}'}` lists them"


def _nearest_ids(problems: list[Problem], level: int, spec: str) -> str:
    numbers = sorted(p.number for p in problems if p.level == level)
    if not numbers:
        levels = ", ".join(str(n) for n in sorted({p.level for p in problems}))
        return f"its levels are {levels}: {_list_hint(spec)}"
    return f"level {level} has {level}/{numbers[0]} to {level}/{numbers[-1]}: {_list_hint(spec, level)}"


def _nearest_names(problems: list[Problem], wanted: str, spec: str) -> str:
    by_name = {p.name.lower(): p for p in problems}
    close = difflib.get_close_matches(wanted.lower().removesuffix(".py"), list(by_name), n=3, cutoff=0.5)
    nearest = ", ".join(f"{by_name[c].name} ({by_name[c].level}/{by_name[c].number})" for c in close)
    return f"nearest: {nearest}; {_list_hint(spec)}" if nearest else _list_hint(spec)


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
