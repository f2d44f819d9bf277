"""A shared precompiled header's maker, beside the build that needs it (referee/builds.py).

The header is made by a confined builder process of its own that compiles nothing of the candidate's: a
probe with the build's flags (`pch_probe`) gives load_inline's ninja file, and the installed header (or
the lite shim) is precompiled with those flags (backends/jitbuild.make_pch). The referee adopts it
sealed; the build's own process, which compiles the candidate's sources, never writes it.
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kbench.backends import pch

Compile = Callable[[dict[str, Any]], dict[str, Any]]  # a request -> what jitbuild.run returns


def pch_probe(arguments: dict[str, Any]) -> dict[str, Any]:
    """`arguments` (a build attempt's) with a source that defines nothing in place of the candidate's: the
    same compile flags in load_inline's ninja file, and nothing of the candidate's to compile."""
    from kbench.backends.fastbuild import with_cuda

    kept = {k: v for k, v in arguments.items() if k not in ("cpp_sources", "cuda_sources", "sycl_sources")}
    probe = kept | {
        "name": "kbench_pch_probe",
        "cpp_sources": ["// kbench: the probe of a precompiled header"],
    }
    return probe | {"functions": None, "with_cuda": with_cuda(arguments)}


class PchMaker:
    """The maker of a shared precompiled header: a confined process of its own (`compile_` with a maker's
    request, jitbuild.make_pch) started beside the build, in a staging folder only it writes, from the
    flags of the build's first attempt and the installed header (or the lite shim `header`); the build's
    process, which compiles the candidate's sources, never touches it. `adopt` waits for it and moves what
    it made into place, sealed (pch.adopt)."""

    def __init__(self, staging: Path, first: dict[str, Any], header: Path | None, compile_: Compile) -> None:
        self.staging = staging
        self.staging.mkdir(parents=True)
        self.header = header
        request: dict[str, Any] = {
            "attempts": [],
            "staging": str(self.staging),
            "pch": str(self.staging / "pch"),
            "pch_probe": pch_probe(first),
            "pch_header": str(header) if header is not None else None,
        }
        self.done: dict[str, Any] = {}
        self._thread = threading.Thread(target=lambda: self.done.update(compile_(request)), daemon=True)
        self._thread.start()

    def adopt(self, target: Path) -> float | None:
        """Wait for the maker; the seconds it spent when its header was adopted into `target`, else None."""
        self._thread.join()
        if pch.adopt(self.staging / "pch", target, self.header):
            seconds = self.done.get("pch_seconds")
            return float(seconds) if isinstance(seconds, int | float) else None
        return None

    def cleanup(self) -> None:
        self._thread.join()
        shutil.rmtree(self.staging, ignore_errors=True)
