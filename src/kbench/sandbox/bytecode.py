"""Compiled bytecode for kbench's own processes where the installation keeps none beside its sources.

Python compiles every module it imports from source unless a `.pyc` of it is cached, beside the source
(`__pycache__`) or under `sys.pycache_prefix`. Installers that do not compile (uv's default, `pip
--no-compile`) together with PYTHONDONTWRITEBYTECODE or a read-only site-packages (container images)
leave torch with no bytecode at all, and then every fresh interpreter compiles torch's ~1,100 modules:
on an H200 host `import torch` took 3.5-3.9 s so, against 2.2 s from bytecode. A cold `kbench eval`
pays that twice at once (this process and the warm starter, whose import is the longest step of the
verdict), and every spawned worker pays it again.

Where torch's package has no bytecode beside its source (`folder`), kbench keeps bytecode under its cache
folder, `<cache>/pycache` (the cache folder as KBENCH_CACHE_DIR or the default names it: this runs before
any setting is read): the command's own process reads and writes there (`use_here`, from the entry
point), and so do the warm starter and the floor's count, trusted processes that import only torch and
kbench (`env(writes=True)`). Workers that import a candidate read it and never write (`env()`, and a
worker forked from the starter takes its flag from its job's environment: sandbox/zygote.py), so no
candidate's module lands there. A file there is code that kbench's own processes run, so the folder must
also lie outside every folder a confined process may be let write (the temporary folders, where job
folders are made, and the per-user Triton, CUDA and torch extension caches): a cache folder beneath one of them (KBENCH_CACHE_DIR
in /tmp, a home folder in /tmp) is passed over for the default one, and where that lies there too no
folder is kept. (Without Landlock a candidate can write whatever the user can, this folder as much as
the installation's own files.) Python checks each cached file against its source's size and time, so an
upgraded torch is compiled again, not read stale; the folder can be deleted at any time.

KBENCH_PYCACHE=off leaves Python's own behaviour alone; so does a PYTHONPYCACHEPREFIX the user set.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from kbench.files import default_cache_dir

SWITCH_ENV = "KBENCH_PYCACHE"  # "off" (or 0/false/no): never; anything else or unset: where needed
PREFIX_ENV = "PYTHONPYCACHEPREFIX"
NO_WRITE_ENV = "PYTHONDONTWRITEBYTECODE"
_OFF = ("off", "0", "false", "no")


def has_bytecode(package: str) -> bool | None:
    """Whether `package`'s `__init__` has its compiled bytecode beside its source (None: not installed, or
    no source to compile). Found without importing the package."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    origin = spec.origin if spec is not None else None
    if not origin or not origin.endswith(".py"):
        return None
    source = Path(origin)
    return (source.parent / "__pycache__" / f"{source.stem}.{sys.implementation.cache_tag}.pyc").exists()


def folder(environ: Mapping[str, str] | None = None, package: str = "torch") -> Path | None:
    """Where kbench's processes keep bytecode, or None where Python's own behaviour serves: turned off,
    a prefix of the user's, or `package` (torch: the import that costs seconds) compiled beside its source."""
    environ = os.environ if environ is None else environ
    if environ.get(SWITCH_ENV, "").strip().lower() in _OFF or environ.get(PREFIX_ENV):
        return None
    if sys.implementation.cache_tag is None or has_bytecode(package) is not False:
        return None
    cache = environ.get("KBENCH_CACHE_DIR")
    roots = [Path(cache).expanduser()] if cache else []
    open_to_candidates = candidate_writable()
    for root in [*roots, default_cache_dir()]:
        where = Path(os.path.realpath(root / "pycache"))
        if not any(where.is_relative_to(f) for f in open_to_candidates):
            return where
    return None


def candidate_writable() -> list[Path]:
    """The folders beneath which a confined process may be let write, whatever its job (its job and
    working folders are made in the temporary folder; the per-user caches of the tools)."""
    from kbench.sandbox import confine

    found = [
        *confine.temp_folders(),
        confine.torch_extensions(),
        confine.triton_cache(),
        confine.cuda_cache(),
    ]
    return [Path(os.path.realpath(f)) for f in found]


@functools.lru_cache(maxsize=1)
def _folder() -> Path | None:
    return folder()


def env(writes: bool = False) -> dict[str, str]:
    """What a child process's environment adds for the bytecode folder (nothing where none is kept):
    the prefix, and whether it may write there (`writes`: trusted processes that import no candidate)."""
    where = _folder()
    if where is None:  # no folder kept: no kbench process writes bytecode beside the sources
        return {NO_WRITE_ENV: "1"}
    return {PREFIX_ENV: str(where), NO_WRITE_ENV: "" if writes else "1"}  # empty: not set


def use_here() -> Path | None:
    """This process reads and writes its bytecode in the folder from now on (the command's own process,
    before its imports); the folder, or None where none is kept."""
    where = _folder()
    if where is not None:
        sys.pycache_prefix = str(where)
        sys.dont_write_bytecode = False
    return where
