"""The speed-of-light floor a verdict's timing is checked against (host side), counted beside the host.

The floor comes from the problem's FLOP and byte counts (analysis/roofline.py), kept on disk once
counted. A first count traces the reference model on the meta device: about a second of pure Python
(importing sympy, torch's symbolic shapes and flop counter, then the trace) on a quiet core. On a thread of
the host, as an evaluation ran it beside its workers, that second held the GIL while the host's other
threads were handing work to the workers (offering device buffers, seeing a worker exit, reading its
result, telling the candidate to time), and so lengthened a cold verdict's critical path. Where the
evaluation forks its workers from the warm starter, the count runs in a process of its own forked from
there too (worker/counts.py: torch already imported, Triton kept out), and the host only waits for it and
reads the file it kept. Without a starter, or when that process fails or outlasts `COUNT_WAIT_S`, the host
counts itself, on its own thread; an error of the count itself then reaches the verdict as a warning (flow.py).
"""

from __future__ import annotations

import logging
import subprocess
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from kbench import entries
from kbench.config import RunConfig
from kbench.hardware import device_name
from kbench.sandbox.host import stopping
from kbench.types import Problem

if TYPE_CHECKING:
    from kbench.analysis.roofline import SOL, FlopCount

COUNT_WAIT_S = 120.0  # the count of a large model on a loaded host; past it the host counts itself
log = logging.getLogger(__name__)


def sol_ms(problem: Problem, cfg: RunConfig, device: str) -> float | None:
    """The time no honest kernel for the problem can beat on this GPU (`SOL.floor_ms`, at TF32 rates: the
    most permissive), or None off a known GPU."""
    sol = speed_of_light(problem, cfg, device)
    return sol.floor_ms if sol is not None else None


def speed_of_light(problem: Problem, cfg: RunConfig, device: str) -> SOL | None:
    """The problem's roofline on this GPU at TF32 rates (its `sol_ms`, the verdict's speed of light, and
    its `floor_ms`, the time no honest kernel beats), or None off a known GPU."""
    if not device.startswith("cuda"):
        return None
    from kbench.analysis.gpus import match_device_name
    from kbench.analysis.roofline import disk_counts, sol_from_counts

    gpu = match_device_name(device_name(device))
    if gpu is None:
        return None
    folder = cfg.cache_dir / "flops"  # a later `kbench eval` of the problem reads them: no trace
    counts = count_beside(problem, cfg, device, folder)
    if counts is None:
        if stopping():
            return None  # stopped on a signal (which ended the count's process): no verdict is coming
        counts = disk_counts(problem, cfg.preset, cfg.dtype, folder)  # the host counts itself
    return sol_from_counts(counts, gpu, cfg.dtype, tf32=True)


def count_beside(problem: Problem, cfg: RunConfig, device: str, folder: Path) -> FlopCount | None:
    """The counts of (problem, cfg.preset, cfg.dtype) kept in `folder`, counted first by a process forked
    from the warm starter unless they are kept there already; None when no starter serves this evaluation
    or the process failed (the caller then counts itself, as without one)."""
    from kbench.analysis.roofline import counts_path, kept_counts

    path = counts_path(problem, cfg.preset, cfg.dtype, folder)
    kept = kept_counts(path)
    if kept is not None or cfg.worker_start == "spawn":
        return kept  # spawn: a new interpreter would import torch first, seconds more than counting here
    from kbench.evaluate.prebuild import reference_env
    from kbench.sandbox import procs, starter
    from kbench.sandbox.protocol import COUNT_FILE, CountRequest

    with tempfile.TemporaryDirectory(prefix="kbench-counts-") as tmp:
        jobdir = Path(tmp)
        request = CountRequest(problem=problem, preset=cfg.preset, dtype=cfg.dtype, folder=str(folder))
        (jobdir / COUNT_FILE).write_text(request.model_dump_json())
        logfile = jobdir / "worker.log"
        # the reference's starter (the same start-up); a trusted count: its imports may write bytecode
        env = procs.worker_env(reference_env(cfg, device), bytecode_writes=True)
        proc = starter.start_worker(entries.COUNTS, jobdir, tmp, env, logfile, None, scratch=[tmp])
        if proc is None:
            return None
        try:
            code = proc.wait(COUNT_WAIT_S)
        except subprocess.TimeoutExpired:
            procs.kill_session(proc.pid)
            log.warning("%s: the count ran past %.0f s; counted in the host", problem.key, COUNT_WAIT_S)
            return None
        if code != 0:
            tail = logfile.read_text(errors="replace")[-800:] if logfile.exists() else ""
            log.warning(
                "%s: the count exited with code %s; counted in the host:\n%s", problem.key, code, tail
            )
            return None
    return kept_counts(path)
