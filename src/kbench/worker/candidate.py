"""The candidate's runner (worker side): the only code that imports a candidate, and it runs walled in.

The referee (kbench/referee/) forked this process, walled it in (namespaces, limits, Landlock) and runs it
as a runner (worker/runner.py): on `Load` it imports the candidate, its `load_inline` calls answered from
the build cache or built by the referee (backends/buildcache.py), and builds `ModelNew` under the
reference's init seed; then it runs the calls it is told to run on the inputs it is given. Before the
import it installs the backend's hooks and takes the guards' snapshots (worker/guards.py).

This process is untrusted once the candidate is imported: everything it answers is data the referee
checks or only reports (the guards, the kernel-use profile, its own clock). The numbers that decide a
verdict -- times, which calls are checked, their outputs, the inputs' integrity -- are the referee's.
"""

from __future__ import annotations

import importlib
import sys
import time
from pathlib import Path
from typing import Any

from kbench.sandbox.commands import (
    BuildAnswer,
    BuildRequest,
    Checked,
    Failed,
    Guarded,
    Loaded,
    Profiled,
    Ready,
)
from kbench.types import Status
from kbench.worker.runner import Role, failure, main


class CandidateRole(Role):
    def __init__(self, spec: Any, channel: Any) -> None:
        super().__init__(spec, channel)
        t0 = time.perf_counter()
        import torch

        from kbench.backends import KernelRecorder, get_backend
        from kbench.problems.inputs import ieee_numerics
        from kbench.worker.guards import Guards

        ieee_numerics()
        torch.set_grad_enabled(False)
        if spec.threads > 0:
            torch.set_num_threads(spec.threads)
        self.device = torch.device(spec.device)
        self.backend = get_backend(spec.backend)
        self.recorder = KernelRecorder()
        self.backend.install_hooks(self.recorder, Path(spec.cache_dir), self._request_build)
        self.module: Any = None
        self.model_obj: Any = None
        self.phases: dict[str, float] = {}
        self.guards: Guards | None = None
        if spec.role != "build":
            for module in self.backend.runner_imports:  # before the guards' snapshot (Triton's do_bench)
                importlib.import_module(module)
            if spec.early_cuda:  # the referee holds the device's timing lock (shared) until Ready
                c0 = time.perf_counter()
                torch.zeros(1, device=self.device)
                torch.cuda.synchronize(self.device)
                self.phases["cuda"] = round(time.perf_counter() - c0, 3)
            self.guards = Guards()
        self.phases["setup"] = round(time.perf_counter() - t0, 3)
        channel.send(Ready(phases=self.phases))

    def _request_build(self, arguments: dict[str, Any]) -> BuildAnswer:
        self.channel.send(BuildRequest(arguments=arguments))
        answer, _ = self.channel.receive(BuildAnswer)
        return answer

    def guard(self, when: str) -> Guarded:
        if self.guards is None:
            return Guarded()
        hit = self.guards.violation(when)
        return Guarded() if hit is None else Guarded(rule=hit[0], message=hit[1])

    def _import(self) -> Failed | None:
        import importlib.util

        path = Path(self.spec.candidate_file)
        found = importlib.util.spec_from_file_location("kbench_candidate", path)
        assert found is not None and found.loader is not None
        module = importlib.util.module_from_spec(found)
        sys.modules["kbench_candidate"] = module
        try:
            found.loader.exec_module(module)
        except (Exception, SystemExit) as exc:
            return failure(exc, Status.BUILD_ERROR if self.recorder.build_failed else Status.LOAD_ERROR)
        self.module = module
        return None

    def _construct(self) -> Failed | None:
        import torch

        from kbench.problems import load
        from kbench.problems.inputs import TORCH_DTYPES

        cls = getattr(self.module, "ModelNew", None)
        if not isinstance(cls, type):
            return Failed(status=Status.LOAD_ERROR.value, message="the candidate defines no class ModelNew")
        try:
            assert self.spec.problem is not None
            loaded = load(self.spec.problem, self.spec.preset)
            torch.manual_seed(self.spec.init_seed)
            init = loaded.get_init_inputs()
            torch.manual_seed(self.spec.init_seed)
            model = cls(*init).to(self.device)
            if self.spec.dtype != "fp32":
                model = model.to(TORCH_DTYPES[self.spec.dtype])
        except (Exception, SystemExit) as exc:
            return failure(exc, Status.BUILD_ERROR if self.recorder.build_failed else Status.LOAD_ERROR)
        self.model_obj = loaded.judged(model)  # a training problem's step around ModelNew
        return None

    def load(self) -> Any:
        t0 = time.perf_counter()
        failed = self._import()
        self.phases["import"] = round(time.perf_counter() - t0, 3)
        if failed is None and self.spec.role != "build":
            t0 = time.perf_counter()
            failed = self._construct()
            self.phases["construct"] = round(time.perf_counter() - t0, 3)
        if failed is not None:
            failed.message = failed.message or self.recorder.build_log
            return failed
        return Loaded(
            build_seconds=round(self.recorder.build_seconds, 3),
            build_cache_hit=self.recorder.cache_hit,
            build_recipe=str(self.recorder.extra.get("build_recipe", "")),
            build_log=self.recorder.build_log,
            phases=self.phases,
        )

    def model(self, mode: str) -> Any:
        """ModelNew, or a training problem's step around it; the step's forward alone for a mode that
        names it (baselines.modes.FORWARD)."""
        from kbench.baselines.modes import ABLATED_BACKWARD, split_forward

        if mode == ABLATED_BACKWARD:  # what its kernels produce made NaN during the backward alone
            return self.model_obj.with_backward_hook(self.ablating)
        return self.model_obj.forward_only if split_forward(mode)[1] else self.model_obj

    def ablating(self, on: bool) -> None:
        self.recorder.ablate = on

    def profile(self, inputs: list[Any]) -> Any:
        from kbench.backends.profile import cpu_calls, gpu_kernels

        names = set(self.backend.kernel_symbols(list(self.spec.kernel_names))) | self.recorder.defined
        try:
            if self.device.type == "cuda":
                use = gpu_kernels(lambda: self.model_obj(*inputs), names)  # a training step: both passes
            else:
                use = cpu_calls(lambda: self.model_obj(*inputs), self.recorder)
        except (Exception, SystemExit) as exc:
            return failure(exc, Status.RUNTIME_ERROR)
        return Profiled(ran=list(use.ran), share=use.share, library=list(use.library))

    def compile_check(self) -> Any:
        launches = self.recorder.extra.get("triton_launches")
        if not launches:
            return Checked()
        import tempfile

        from kbench.backends.tritoncheck import compile_in_clean_process

        arch = self.spec.compile_arch
        with tempfile.TemporaryDirectory(prefix="kbench-check-") as tmp:
            check = compile_in_clean_process(
                launches, self.spec.candidate_file, Path(tmp), self.spec.cache_dir, arch
            )
        return Checked(ok=check.ok, log=check.log)


if __name__ == "__main__":
    sys.exit(main(CandidateRole))
