"""Problems: addressing, selection and loading.

Addresses: `SOURCE:LEVEL/ID` (e.g. `kbench:2/17`, `path/to/KernelBench:1/3`, `hf:1/3`), `LEVEL/ID` (the
embedded suite), a name (`kbench:Gemm_ReLU`, `Gemm_ReLU`, `17_Gemm_ReLU`), case-insensitive, or the path
of a problem file (`path/to/17_Gemm_ReLU.py`, also written `path/to/17_Gemm_ReLU.py:`). A problem file's
key (`file:NAME@DIGEST:LEVEL/ID`, problems/sources.py) names its content, not a place: `find_problems`
reads such keys back from the files and folders it is given.
"""

from __future__ import annotations

import difflib
import os
import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from functools import lru_cache
from pathlib import Path

from kbench.errors import ProblemError
from kbench.problems.loader import LoadedProblem, build_model, load
from kbench.problems.sources import (
    FILE_KIND,
    check_unique,
    content_hash,
    content_number,
    file_level,
    is_file_problem,
    load_source,
    parse_file_key,
    parse_spec,
    read_file,
)
from kbench.types import Problem

__all__ = [
    "LoadedProblem",
    "absolute_address",
    "build_model",
    "check_in_source",
    "find_problems",
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
    if spec.startswith(f"{FILE_KIND}:") and not Path(spec).exists():
        raise ProblemError(
            f"{address}: the key of a problem file names its content, not where it is: give the file's path"
        )
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
        given: dict[str, Problem] = {}
        for p in (get_problem(i, source) for i in ids):
            given.setdefault(p.key, p)
        chosen = _own_numbers(list(given.values()))
        check_unique(chosen)
    else:
        chosen = source_problems(source)
    if level is not None:
        chosen = [p for p in chosen if p.level == level]
    for tag in tags or []:
        chosen = [p for p in chosen if tag in p.tags]
    return chosen[:limit] if limit else chosen


def _own_numbers(chosen: list[Problem]) -> list[Problem]:
    """A problem file whose level and number another chosen problem has too (`a/1_Foo.py`, `b/1_Bar.py`)
    takes its content number, as a file without a KernelBench number does: every problem of a run keeps
    its own generations files, whichever of them comes first. The same content given twice under one name
    is one key, kept once before this."""
    shared = Counter((p.level, p.number) for p in chosen)
    return [
        replace(p, number=content_number(p.code))
        if shared[(p.level, p.number)] > 1 and is_file_problem(p)
        else p
        for p in chosen
    ]


def _local_path(address: str) -> Path | None:
    """The file or folder an address or source names on this machine (`a/relu.py`, `path/to/KB`,
    `path/to/KB:1/3`), or None (a suite's address, nothing there)."""
    if address in ("", "kbench", "hf") or address.startswith("hf="):
        return None
    for spec in (address, _split(address)[0]):
        path = Path(spec).expanduser()
        if spec not in ("kbench", "hf") and path.exists():
            return path
    return None


def absolute_address(address: str) -> str:
    """`address` with the file or folder it names made absolute (`a/relu.py` -> `/cwd/a/relu.py`), so a
    run's stored addresses name the same files from any working folder; other addresses unchanged."""
    path = _local_path(address)
    if path is None:
        return address
    if path == Path(address).expanduser():
        return os.path.abspath(path)
    return f"{os.path.abspath(path)}:{_split(address)[1]}"


def _files_in(places: Sequence[str]) -> Iterator[Path]:
    """The .py files of `places` (addresses, files or folders, searched recursively) that exist here."""
    for place in places:
        path = _local_path(place)
        if path is not None and path.is_file():
            yield path
        elif path is not None:
            yield from sorted(path.rglob("*.py"))


def _as_stored(problem: Problem, key: str) -> Problem:
    """`problem` under the stored `key`: the level, number (and a file's name) the run filed it under."""
    source, _, rest = key.rpartition(":")
    level, number = (int(x) for x in rest.split("/"))
    named = parse_file_key(key)
    name = named.name if named is not None else problem.name
    return replace(problem, source=source, level=level, number=number, name=name)


def find_problems(
    keys: Sequence[str], places: Sequence[str], code_hashes: Mapping[str, str]
) -> tuple[list[Problem], list[str]]:
    """The problems a run stored under `keys`, in order, wherever their files are now, and the keys found
    nowhere. A key of the embedded suite or the Hugging Face dataset resolves as an address. A problem
    file's key resolves by content: the first file among `places` whose hash starts with the key's
    digest. A folder source's key (`/abs/folder:L/N`) resolves at its path while the code there has the
    hash `code_hashes` holds for it, else by that hash among `places`. Every problem keeps its stored key,
    whatever file it is read from now; an edited file is another problem, found nowhere."""
    found: dict[str, Problem] = {}
    digests: dict[str, str] = {}
    for key in keys:
        named = parse_file_key(key)
        if named is not None:
            digests[key] = named.digest
            continue
        source = key.rpartition(":")[0]
        stored_hash = code_hashes.get(key, "")
        if Path(source).is_absolute() and not Path(source).exists():
            digests[key] = stored_hash
            continue
        try:
            problem = get_problem(key)
        except ProblemError:
            digests[key] = stored_hash
            continue
        if Path(source).is_absolute() and stored_hash and problem.code_hash != stored_hash:
            digests[key] = stored_hash  # edited where it lies: look for the stored content elsewhere
            continue
        found[key] = _as_stored(problem, key)
    wanted = {k: d for k, d in digests.items() if d}
    for path in _files_in(places) if wanted else ():
        try:
            digest = content_hash(path.read_text())
        except (OSError, UnicodeDecodeError):
            continue
        for key in [k for k, d in wanted.items() if digest.startswith(d)]:
            found[key] = _as_stored(read_file(path, file_level(path)), key)
            del wanted[key]
    return [found[k] for k in keys if k in found], [k for k in keys if k not in found]
