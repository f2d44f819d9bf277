"""Precompiled `torch/extension.h` for load_inline's bindings file (worker side, used by buildcache).

The bindings file load_inline writes (`main.cpp`, which starts with `#include <torch/extension.h>`) is
compiled by g++ against a precompiled `torch/extension.h`. GCC uses a `.gch` only when it was made with
the same compiler and flags (it silently ignores one that does not match), so one PCH is kept per
(header, toolchain, with_cuda, extra_cflags, extra_include_paths) under
`ROOT/.pch/KEY/torch/extension.h.gch`, found first because its folder is added as an include path. The
header is torch's own or the lite shim of backends/fastbuild.py (C++ sources that define functions),
which `ROOT/.pch/KEY/torch/extension.h` links to.
A PCH is made from the exact compile flags of a build (the build.ninja load_inline writes for them),
written under a temporary name and renamed into place. It is made by a confined process of its own
(jitbuild.make_pch, started by the referee beside the build that needs it: referee/builds.py), never by
one that compiles a candidate's sources: that process writes the ninja file of a probe with the build's
flags and a source that defines nothing, without building it, and precompiles the header with those
flags; the referee adopts the result, sealed with a manifest that every use verifies (`ready`). Only CPU
builds make them (`KBENCH_BUILD_PCH=make`, set by the host for large batches: one costs ~30 s of a core
and ~0.8 GB); evaluation workers only use one that exists. Made beside the batch's first build rather
than after it: on a 16-core host the PCH of a 48-candidate batch had come 58 s into it, after 18 builds
had gone without it (~20 s each against ~12 s with it).

The mode comes from the environment the host gives the worker: KBENCH_BUILD_PCH=make|use|off.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import subprocess
import time
from pathlib import Path
from typing import Any

from kbench.backends.fastbuild import as_list, with_cuda, with_include_first

PCH_ENV = "KBENCH_BUILD_PCH"
PCH_FILE = Path("torch", "extension.h.gch")
_CLAIM_STALE_S = 900.0
_EXT_NAME_FLAG = re.compile(r"^-DTORCH_EXTENSION_NAME=")


def pch_mode() -> str:
    mode = os.environ.get(PCH_ENV, "use")
    return mode if mode in ("make", "use", "off") else "use"


def pch_dir(
    root: Path, arguments: dict[str, Any], toolchain: dict[str, str], header: Path | None = None
) -> Path:
    """The folder of the PCH for these build flags, of torch/extension.h or of `header` (a shim's, whose
    folder name is the digest of its content: fastbuild._shim_folder)."""
    blob = json.dumps(
        {
            "header": header.parent.parent.name if header is not None else "torch",
            "toolchain": toolchain,
            "with_cuda": with_cuda(arguments),
            "cflags": as_list(arguments.get("extra_cflags")),
            "includes": as_list(arguments.get("extra_include_paths")),
        },
        sort_keys=True,
    )
    return root / ".pch" / hashlib.sha256(blob.encode()).hexdigest()[:20]


def with_pch(arguments: dict[str, Any], folder: Path) -> dict[str, Any] | None:
    """The arguments with the PCH folder searched first; None when that PCH does not exist (yet)."""
    if not (folder / PCH_FILE).is_file():
        return None
    return with_include_first(arguments, folder)


def _ninja_vars(build_dir: Path) -> dict[str, str]:
    """`cxx` and `cflags` of the ninja file in `build_dir`."""
    values: dict[str, str] = {}
    try:
        text = (build_dir / "build.ninja").read_text()
    except OSError:
        return values
    for line in text.splitlines():
        name, sep, value = line.partition(" = ")
        if sep and not line.startswith(" ") and name in ("cxx", "cflags"):
            values[name] = value.strip()
    return values


def _claim(folder: Path) -> bool:
    folder.mkdir(parents=True, exist_ok=True)
    claim = folder / ".claim"
    try:
        fd = os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        try:
            stale = time.time() - claim.stat().st_mtime > _CLAIM_STALE_S
        except FileNotFoundError:
            return False
        if not stale:
            return False
        claim.unlink(missing_ok=True)  # its maker died; the next builder to get here takes it over
        return _claim(folder)
    os.write(fd, str(os.getpid()).encode())
    os.close(fd)
    return True


def _torch_header() -> Path | None:
    from torch.utils.cpp_extension import include_paths

    found = [Path(p, "torch", "extension.h") for p in include_paths()]
    return next((h for h in found if h.is_file()), None)


def make_pch(folder: Path, build_dir: Path, header: Path | None = None) -> float | None:
    """Precompile torch/extension.h (or `header`) with the flags of the build in `build_dir`.

    Returns the seconds spent, or None when the PCH exists, the build's flags could not be read, or
    another worker holds the claim. Failures leave no file behind but the claim (so nobody retries a
    PCH that cannot be made with these flags until the claim goes stale).
    """
    return _compile_pch(folder, _ninja_vars(build_dir), header)


def _compile_pch(folder: Path, found: dict[str, str], header: Path | None = None) -> float | None:
    if (folder / PCH_FILE).is_file() or "cflags" not in found:
        return None
    header = header or _torch_header()
    if header is None or not _claim(folder):
        return None
    flags = [f for f in shlex.split(found["cflags"]) if not _EXT_NAME_FLAG.match(f)]
    flags = [f for f in flags if f != f"-I{folder}"]
    target = folder / PCH_FILE
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.{os.getpid()}.part")
    cxx = shlex.split(found.get("cxx", "c++")) or ["c++"]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(
            [*cxx, "-x", "c++-header", str(header), "-o", str(partial), *flags],
            capture_output=True,
            text=True,
            timeout=600,
        )
    except (OSError, subprocess.SubprocessError):
        partial.unlink(missing_ok=True)
        return None
    if proc.returncode != 0:
        partial.unlink(missing_ok=True)
        (folder / "error.log").write_text(proc.stderr[-8000:])
        return None
    # A second `#include <torch/extension.h>` (candidates often repeat the implicit one) resolves into
    # this folder once the PCH was used: the real header must be found there too (#pragma once skips it).
    link = folder / "torch" / "extension.h"
    link.unlink(missing_ok=True)
    link.symlink_to(header)
    os.rename(partial, target)
    (folder / "cflags.txt").write_text(shlex.join(flags) + "\n")
    return time.perf_counter() - t0


def ready(folder: Path, header: Path | None = None) -> bool:
    """Whether `folder` holds a finished precompiled header a build may use: its files match the manifest
    the referee wrote when it adopted them, and its `torch/extension.h` leads to `header` (by default the
    installed one)."""
    from kbench.backends.buildcache import verified

    if verified(folder) is None or not (folder / PCH_FILE).is_file():
        return False
    link = folder / "torch" / "extension.h"
    header = header or _torch_header()
    return header is not None and link.is_symlink() and os.path.realpath(link) == os.path.realpath(header)


def sound(folder: Path) -> bool:
    """`ready` for the header its link leads to: the installed one, or a shim's in the same cache
    (ROOT/.shim/DIGEST/torch/extension.h) whose folder still matches its manifest."""
    from kbench.backends.buildcache import verified

    link = folder / "torch" / "extension.h"
    target = Path(os.path.realpath(link)) if link.is_symlink() else None
    shim = target.parent.parent if target is not None else None
    shims = Path(os.path.realpath(folder.parent.parent / ".shim"))  # the cache's own (it may be a link)
    if shim is not None and shim.parent == shims and verified(shim) is not None:
        return ready(folder, target)
    return ready(folder)


def adopt(made: Path, folder: Path, header: Path | None = None) -> bool:
    """Move a precompiled header a builder made (in its staging folder `made`) into `folder`, sealed with a
    manifest; the link to `header` (by default the installed one) is made here, not taken from the
    builder. False when there was none to take."""
    from kbench.backends.buildcache import place, seal

    gch = made / PCH_FILE
    header = header or _torch_header()
    if header is None or gch.is_symlink() or not gch.is_file():
        return False
    link = made / "torch" / "extension.h"
    link.unlink(missing_ok=True)
    link.symlink_to(header)
    for stray in (made / ".claim", made / "error.log"):
        stray.unlink(missing_ok=True)
    files = [str(PCH_FILE)] + (["cflags.txt"] if (made / "cflags.txt").is_file() else [])
    seal(made, files)
    folder.parent.mkdir(parents=True, exist_ok=True)
    place(made, folder)
    return True
