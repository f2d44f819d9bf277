"""The Ray executor: evaluation jobs as Ray tasks with one GPU each, builds as CPU tasks.

Works against a local Ray (started here when none is running) or a cluster (`--ray-address`). Ray sets
CUDA_VISIBLE_DEVICES for each task, so a task evaluates on `cuda` (its one visible GPU) or on `cpu` when
jobs ask for no GPU. Results come back to the host, which alone writes the store.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from typing import Any

from kbench.config import RunConfig
from kbench.errors import require
from kbench.executors import register_executor
from kbench.executors.base import BuildFn, EvalFn, Job, ResultFn
from kbench.types import BuildResult, Verdict


def _build_remote(build: BuildFn, job: Job) -> BuildResult | None:
    return build(job)


def _eval_remote(evaluate: EvalFn, job: Job, device: str, built: BuildResult | None) -> Verdict:
    return evaluate(job, device, built)


class RayExecutor:
    def __init__(
        self,
        address: str | None = None,
        gpus_per_job: float | None = None,
        num_cpus: int | None = None,
        tmp_dir: str | None = None,
    ):
        self.address = address
        self.tmp_dir = tmp_dir
        self.gpus_per_job = gpus_per_job
        self.num_cpus = num_cpus

    def _init(self) -> Any:
        ray = require("ray", "ray")
        if not ray.is_initialized():
            os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
            kwargs: dict[str, Any] = {"ignore_reinit_error": True, "include_dashboard": False}
            if self.address:
                kwargs["address"] = self.address
            else:
                kwargs["num_cpus"] = self.num_cpus
                kwargs["_temp_dir"] = self.tmp_dir or tempfile.mkdtemp(prefix="kbench-ray-")
            ray.init(**kwargs)
        return ray

    def run(self, jobs: Iterable[Job], build: BuildFn, evaluate: EvalFn, on_result: ResultFn) -> None:
        ray = self._init()
        gpus = self.gpus_per_job
        if gpus is None:
            gpus = 1.0 if ray.cluster_resources().get("GPU", 0) >= 1 else 0.0
        device = "cuda" if gpus > 0 else "cpu"
        build_task = ray.remote(num_cpus=1)(_build_remote)
        eval_task = ray.remote(num_gpus=gpus, num_cpus=1 if gpus == 0 else 0)(_eval_remote)
        build_ref, eval_ref = ray.put(build), ray.put(evaluate)
        pending_builds = {build_task.remote(build_ref, job): job for job in jobs}
        pending_evals: dict[Any, Job] = {}
        while pending_builds or pending_evals:
            ready, _ = ray.wait(list(pending_builds) + list(pending_evals), num_returns=1)
            ref = ready[0]
            if ref in pending_builds:
                job = pending_builds.pop(ref)
                pending_evals[eval_task.remote(eval_ref, job, device, ref)] = job
            else:
                job = pending_evals.pop(ref)
                on_result(job, ray.get(ref))


def _ray_options(cfg: RunConfig) -> dict[str, object]:
    return {"address": cfg.ray_address, "tmp_dir": str(cfg.ray_tmp) if cfg.ray_tmp else None}


@register_executor("ray", _ray_options)
def _make_ray(**options: object) -> RayExecutor:
    allowed = {k: v for k, v in options.items() if k in ("address", "gpus_per_job", "num_cpus", "tmp_dir")}
    return RayExecutor(**allowed)  # type: ignore[arg-type]
