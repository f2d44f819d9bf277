"""Builds ahead of evaluation, and the environment every worker process gets (host side).

`prebuild` compiles a candidate's extension in a sandboxed worker with no GPU visible, into the shared
content-addressed cache (backends/buildcache.py), so the evaluation worker only loads it. Every worker
of one run gets the same TORCH_CUDA_ARCH_LIST and build recipe, so their build keys agree.
"""

from __future__ import annotations

import tempfile
from dataclasses import asdict
from pathlib import Path

from kbench.backends import get_backend
from kbench.checks import kernel_names
from kbench.config import RunConfig
from kbench.evaluate.judge import read_worker
from kbench.evaluate.plan import worker_preloads
from kbench.sandbox import isolate
from kbench.sandbox.host import REFEREE, run_worker
from kbench.sandbox.protocol import JobSpec
from kbench.types import BuildResult, Candidate, Status


def static_rejection(candidate: Candidate, cfg: RunConfig) -> BuildResult | None:
    """The static rules' rejection of `candidate` as a failed build (its verdict), None when they pass it:
    checked before a build worker imports it, on every path that builds."""
    if not cfg.static_checks:
        return None
    from kbench.checks import SYNTAX_RULE, run_checks

    report = run_checks(candidate.source, candidate.backend, cfg.dtype)
    first = next((f for f in report.findings if f.severity.value == "reject"), None)
    if first is None:
        return None
    if first.rule == SYNTAX_RULE:
        status, message, rule = Status.LOAD_ERROR, f"line {first.line}: {first.message}", ""
    else:
        status, message, rule = Status.STATIC_REJECT, first.message, f"static:{first.rule}"
    return BuildResult(ok=False, backend=candidate.backend, status=status.value, message=message, rule=rule)


PCH_MIN_BATCH = 16  # queued builds from which a builder makes a precompiled header (~50 s, ~0.8 GB)


def cuda_arch_list(cfg: RunConfig, device: str) -> str:
    """The TORCH_CUDA_ARCH_LIST of every build and evaluation worker, so their build keys agree.

    The host's own setting wins; else the GPU's capability when the host sees one; else `cfg.cuda_arch`.
    """
    import os

    if os.environ.get("TORCH_CUDA_ARCH_LIST"):
        return os.environ["TORCH_CUDA_ARCH_LIST"]
    if device.startswith("cuda"):
        from kbench.hardware import device_capability

        capability = device_capability(device)
        if capability is not None:
            return f"{capability[0]}.{capability[1]}"
    return cfg.cuda_arch


def base_env(cfg: RunConfig, device: str) -> dict[str, str]:
    """What every worker's environment carries: OpenMP's thread count for CPU workers (reference and
    candidate alike), set before it starts; the GPU lease folder when the config names one."""
    from kbench.sandbox import lease

    env = {} if device.startswith("cuda") else {"OMP_NUM_THREADS": str(cfg.cpu_threads)}
    return env | ({lease.DIR_ENV: str(cfg.lease_dir)} if cfg.lease_dir is not None else {})


TRUSTED_CACHES = "trusted"  # cache_dir/trusted: the reference worker's compiler caches (below)


def reference_env(cfg: RunConfig, device: str) -> dict[str, str]:
    """The reference worker's environment: `base_env`, and torch.compile's caches (Inductor's, and the
    Triton kernels it compiles) in a folder of the cache that no candidate can write. Candidates write the
    default Triton and temporary folders (their own kernels compile there); a baseline that loaded its
    kernels from them could be slowed by a candidate that planted a slow kernel under the key a baseline
    kernel hashes to, and every speedup over it inflated."""
    trusted = cfg.cache_dir.absolute() / TRUSTED_CACHES
    env = base_env(cfg, device) | {
        "TORCHINDUCTOR_CACHE_DIR": str(trusted / "inductor"),
        "TRITON_CACHE_DIR": str(trusted / "triton"),
    }
    if not device.startswith("cuda"):
        # One compile thread: a pool of Inductor compile workers costs seconds to start on 2 cores and
        # compiles the same code (the baseline is unchanged); GPUs keep the pool for max-autotune.
        env["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
        # No precompiled header for its C++ kernels: Inductor writes it in the temporary folder, which is
        # this job's own and goes with it, so every cold baseline made it anew (5-8 s of a core more than
        # it saved); the kernels compiled are the same
        env["TORCHINDUCTOR_CPP_CACHE_PRECOMPILE_HEADERS"] = "0"
    return env


def candidate_env(backend_name: str, cfg: RunConfig, device: str, make_pch: bool = False) -> dict[str, str]:
    from kbench.backends import fastbuild, pch

    env = get_backend(backend_name).job_env(device) | base_env(cfg, device)
    pch_mode = "off" if cfg.precompiled_headers == "off" else "make" if make_pch else "use"
    return env | {
        "TORCH_CUDA_ARCH_LIST": cuda_arch_list(cfg, device),
        fastbuild.RECIPE_ENV: "fast" if cfg.fast_builds else "standard",
        pch.PCH_ENV: pch_mode,
        fastbuild.OPS_ENV: "1" if cfg.op_headers else "0",
    }


def prebuild(candidate: Candidate, cfg: RunConfig, device: str, batch: int = 1) -> BuildResult:
    """Build the candidate's extension into the content-addressed cache, with no GPU visible.

    A sandboxed `role="build"` worker imports the candidate (its load_inline calls build), so the later
    evaluation worker, started with the same TORCH_CUDA_ARCH_LIST, only loads the binary. Builds
    nothing (ok, 0 s) for backends that compile at first launch (Triton). `batch` is how many builds the
    caller has queued: from PCH_MIN_BATCH on (or with precompiled_headers="on") the builder also makes
    the precompiled header its flags need, which later builds then use.
    """
    backend = get_backend(candidate.backend)
    if not backend.prebuilds:
        return BuildResult(ok=True, backend=candidate.backend)
    rejected = static_rejection(candidate, cfg)
    if rejected is not None:  # no code of a candidate the static rules reject ever runs, not even to build it
        return rejected
    cfg.cache_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kbench-build-", dir=cfg.cache_dir) as tmp:
        jobdir = Path(tmp)
        path = jobdir / "candidate.py"
        path.write_text(candidate.source)
        walls = isolate.for_device("cpu", cfg.confine)  # a build sees no GPU
        spec = JobSpec(
            role="build",
            preset=cfg.preset,
            dtype=cfg.dtype,
            device=device,
            backend=candidate.backend,
            candidate_file=str(path),
            memory_limit_gb=cfg.memory_limit_gb,
            cache_dir=str(cfg.cache_dir),
            confine=cfg.confine,
            walls=None if walls is None else asdict(walls),
            budgets=cfg.budgets("build"),
        )
        make_pch = cfg.precompiled_headers == "on" or (
            cfg.precompiled_headers == "auto" and batch >= PCH_MIN_BATCH
        )
        env = candidate_env(candidate.backend, cfg, device, make_pch) | {"CUDA_VISIBLE_DEVICES": ""}
        budgets = cfg.budgets("build")
        exit_ = run_worker(
            REFEREE, jobdir, spec, budgets, env=env, start=cfg.worker_start, preload=worker_preloads(spec)
        )
        outcome = read_worker(exit_, jobdir)
    result = outcome.result
    failed = outcome.status is not Status.OK or result is None
    status = outcome.status.value if failed else ""
    if result is None:
        return BuildResult(
            ok=False, backend=candidate.backend, seconds=exit_.seconds, log=outcome.message,
            status=status, message=outcome.message, rule=outcome.rule,
        )  # fmt: skip
    log = result.build_log or ("" if outcome.status is Status.OK else outcome.message)
    return BuildResult(
        ok=not failed,
        backend=candidate.backend,
        seconds=result.build_seconds,
        cache_hit=result.build_cache_hit,
        recipe=result.build_recipe,
        log=log[-8000:],
        kernels=kernel_names(candidate.source, candidate.backend),
        status=status,
        message=outcome.message if failed else "",
        rule=outcome.rule if failed else "",
    )
