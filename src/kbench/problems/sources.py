"""Problem sources as a registry: the embedded suite, a KernelBench-layout folder, one file, Hugging Face.

A source spec names where problems come from: `kbench` (the embedded suite), `hf` or `hf=PATH_OR_NAME`
(the Hugging Face dataset, or a local copy saved with `save_to_disk`), or a path to a folder in
KernelBench's layout (`level1/1_Name.py` ...) or to one problem file.

A folder source is named by its absolute path (its keys read `/abs/folder:LEVEL/NUMBER`). One problem
file is named by what it holds, never by where it lies: its source is `file:NAME@DIGEST`, its name and the
first 8 hex digits of its content's hash (Problem.code_hash), so moving the file keeps its key and editing
it makes another problem (verdicts and baselines of the old content never stand for the new). Its level is
its folder's (`level2/` -> 2, else 0) and its number the one its KernelBench name starts with
(`19_My_Problem.py` -> 19), else a number drawn from its content (`content_number`).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from kbench.errors import ProblemError, require
from kbench.problems.format import parse_problem
from kbench.types import Problem

_FILE_RE = re.compile(r"^(\d+)_(.+)\.py$")
_LEVEL_RE = re.compile(r"^level_?(\d+)$")
FILE_KIND = "file"
DIGEST_DIGITS = 8
_FILE_KEY_RE = re.compile(rf"^{FILE_KIND}:(.+)@([0-9a-f]{{{DIGEST_DIGITS}}}):(\d+)/(\d+)$")


@dataclass(frozen=True)
class SourceSpec:
    kind: str
    arg: str = ""


Loader = Callable[[str], list[Problem]]
_REGISTRY: dict[str, Loader] = {}


def register_source(kind: str) -> Callable[[Loader], Loader]:
    def deco(fn: Loader) -> Loader:
        _REGISTRY[kind] = fn
        return fn

    return deco


def source_kinds() -> list[str]:
    return sorted(_REGISTRY)


def _hf_dataset() -> str:
    """RunConfig.hf_dataset as the environment sets it (KBENCH_HF_DATASET), read through RunConfig's
    env loading."""
    from kbench.config import resolve

    return resolve().hf_dataset


def parse_spec(spec: str) -> SourceSpec:
    """`kbench` | `hf` | `hf=NAME_OR_PATH` | a folder | a file."""
    if spec in ("", "kbench"):
        return SourceSpec("kbench")
    if spec == "hf" or spec.startswith("hf="):
        return SourceSpec("hf", spec[3:] or _hf_dataset())
    path = Path(spec).expanduser()
    if path.is_dir():
        return SourceSpec("dir", os.path.abspath(path))
    if path.is_file():
        return SourceSpec("file", os.path.abspath(path))
    raise ProblemError(
        f"{spec}: no such problem source (use 'kbench', 'hf', 'hf=PATH', or an existing folder or file)"
    )


def load_source(spec: str) -> list[Problem]:
    parsed = parse_spec(spec)
    if parsed.kind not in _REGISTRY:
        raise ProblemError(f"unknown source kind {parsed.kind!r}; known: {', '.join(source_kinds())}")
    problems = _REGISTRY[parsed.kind](parsed.arg)
    check_unique(problems)
    return sorted(problems, key=lambda p: (p.level, p.number))


def check_unique(problems: Iterable[Problem]) -> None:
    """ProblemError when two problems share a level and number (they would share generations files)."""
    seen: dict[tuple[int, int], Problem] = {}
    for p in problems:
        other = seen.get((p.level, p.number))
        if other is not None and (other.key, other.path) != (p.key, p.path):  # not the same one twice
            fix = (
                "they hold the same code: give it once"
                if other.code == p.code
                else "rename one to another ID_Name.py, or put them in different levelN/ folders"
            )
            raise ProblemError(
                f"duplicate problem id {p.level}/{p.number}: {other.path or other.key} and {p.path or p.key} "
                f"({fix})"
            )
        seen[(p.level, p.number)] = p


def make_problem(source: str, level: int, number: int, name: str, code: str, path: str | None) -> Problem:
    parsed = parse_problem(code, path or f"{source}:{level}/{number} ({name})")
    return Problem(
        source=source,
        level=level,
        number=number,
        name=name,
        code=code,
        path=path,
        tags=parsed.tags,
        presets=tuple(["full", *[p for p in parsed.presets if p != "full"]]),
        tolerance=tuple(sorted(parsed.tolerance.items())),
        description=parsed.docstring.strip().splitlines()[0] if parsed.docstring.strip() else "",
    )


# A file without a KernelBench number gets one from its content: 7 hex digits (2^28 values), so two such
# files in one run share one with probability ~n^2 / 2^29.
HASH_DIGITS = 7


def content_number(code: str) -> int:
    return int(content_hash(code)[:HASH_DIGITS], 16)


def content_hash(code: str) -> str:
    """The hex SHA-256 of a problem's code: Problem.code_hash is its first 16 digits, a file key's digest
    its first 8."""
    return hashlib.sha256(code.encode()).hexdigest()


def file_source(name: str, code: str) -> str:
    """The source of a problem file: `file:NAME@DIGEST` (DIGEST: the start of Problem.code_hash)."""
    return f"{FILE_KIND}:{name}@{content_hash(code)[:DIGEST_DIGITS]}"


def is_file_problem(problem: Problem) -> bool:
    return problem.source.startswith(f"{FILE_KIND}:")


@dataclass(frozen=True)
class FileKey:
    """A problem file's key read back: `file:NAME@DIGEST:LEVEL/NUMBER`."""

    name: str
    digest: str
    level: int
    number: int


def parse_file_key(key: str) -> FileKey | None:
    m = _FILE_KEY_RE.match(key)
    return FileKey(m.group(1), m.group(2), int(m.group(3)), int(m.group(4))) if m else None


def read_file(path: Path, level: int, source: str | None = None) -> Problem:
    """The problem `path` holds at `level`; `source` is its folder source's name, None for a file of its own."""
    code = path.read_text()
    m = _FILE_RE.match(path.name)
    number, name = (int(m.group(1)), m.group(2)) if m else (content_number(code), path.stem)
    return make_problem(source or file_source(name, code), level, number, name, code, str(path))


def file_level(path: Path) -> int:
    """A problem file's level: its folder's (`level2/` -> 2), else 0."""
    m = _LEVEL_RE.match(path.parent.name)
    return int(m.group(1)) if m else 0


def _level_dirs(root: Path) -> list[tuple[int, Path]]:
    found = []
    for child in sorted(root.iterdir()):
        m = _LEVEL_RE.match(child.name)
        if child.is_dir() and m:
            found.append((int(m.group(1)), child))
    return found


def load_tree(source: str, root: Path) -> list[Problem]:
    levels = _level_dirs(root)
    if not levels and (root / "KernelBench").is_dir():  # the upstream repository root
        levels = _level_dirs(root / "KernelBench")
    if not levels:
        raise ProblemError(f"{root}: no level folders (expected level1/, level2/, ... with ID_Name.py files)")
    problems = []
    for level, folder in levels:
        for path in sorted(folder.glob("*.py")):
            if path.name.startswith("_"):
                continue
            if not _FILE_RE.match(path.name):
                raise ProblemError(f"{path}: file name must be ID_Name.py (e.g. 1_Square_matmul.py)")
            problems.append(read_file(path, level, source))
    return problems


@register_source("kbench")
def _embedded(_: str) -> list[Problem]:
    root = resources.files("kbench") / "suite"
    return load_tree("kbench", Path(str(root)))


@register_source("dir")
def _directory(arg: str) -> list[Problem]:
    return load_tree(arg, Path(arg))


@register_source("file")
def _single_file(arg: str) -> list[Problem]:
    path = Path(arg)
    return [read_file(path, file_level(path))]


@register_source("hf")
def _huggingface(arg: str) -> list[Problem]:
    datasets = require("datasets", "hf")
    data = datasets.load_from_disk(arg) if Path(arg).exists() else datasets.load_dataset(arg)
    problems = []
    for split in data:
        m = re.match(r"^level_(\d+)$", split)
        if not m:
            continue
        for row in data[split]:
            level = int(row.get("level") or m.group(1))
            path = f"hf:{split}/{row['problem_id']}_{row['name']}"
            name = re.sub(r"^\d+_", "", str(row["name"])).removesuffix(".py")
            problems.append(make_problem("hf", level, int(row["problem_id"]), name, row["code"], path))
    if not problems:
        raise ProblemError(f"{arg}: dataset has no level_N splits with problem_id/name/code/level columns")
    return problems
