"""The reference's runner (worker side): the problem's `Model`, served to its referee like any runner.

It runs trusted code only -- the problem's `Model`, built under the fixed init seed (KernelBench's
semantics, problems.build_model), cast to the problem's dtype -- and torch.compile of it for the compile
baselines (`default`, plus `max-autotune-no-cudagraphs` on a GPU; baselines/modes.py), compiled at its
first call. Its referee (referee/reference.py) commands the same calls and times them with the same loop
as a candidate's (referee/timing.py), so the baselines and the candidate are measured alike.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from kbench.sandbox.commands import Loaded, Ready
from kbench.worker.runner import Role, main


class ReferenceRole(Role):
    def __init__(self, spec: Any, channel: Any) -> None:
        super().__init__(spec, channel)
        import torch

        from kbench.problems.inputs import ieee_numerics

        ieee_numerics()
        torch.set_grad_enabled(False)
        if spec.threads > 0:
            torch.set_num_threads(spec.threads)
        self.phases: dict[str, float] = {}
        if spec.early_cuda:  # the referee holds the device's timing lock (shared) until Ready
            t0 = time.perf_counter()
            torch.zeros(1, device=spec.device)
            torch.cuda.synchronize(spec.device)
            self.phases["cuda_start"] = round(time.perf_counter() - t0, 3)
        self.eager: Any = None
        self.training: Any = None
        self.placed = False
        self.compiled: dict[str, Any] = {}
        channel.send(Ready(phases=self.phases))

    def load(self) -> Any:
        from kbench.problems import build_model, load

        assert self.spec.problem is not None
        t0 = time.perf_counter()
        loaded = load(self.spec.problem, self.spec.preset)
        model = build_model(loaded, self.spec.init_seed)
        self.phases["construct"] = round(time.perf_counter() - t0, 3)
        self.eager, self.training = model, loaded.training
        return Loaded(phases=self.phases)

    def place(self) -> Any:
        """The model to its device: the referee loads it on the CPU before the GPU lease (another job may
        hold the device meanwhile) and places it once it holds the lease."""
        import torch

        from kbench.problems.inputs import TORCH_DTYPES

        if not self.placed:
            self.eager = self.eager.to(torch.device(self.spec.device))
            if self.spec.dtype != "fp32":
                self.eager = self.eager.to(TORCH_DTYPES[self.spec.dtype])
            self.placed = True
        return Loaded()

    def model(self, mode: str) -> Any:
        """The call `mode` times: eager, or a torch.compile mode; a training problem's step around it
        (problems/training.py), so a compiled step's backward is compiled too."""
        from kbench.baselines.modes import split_forward
        from kbench.problems.training import judged

        self.place()
        mode, forward = split_forward(mode)  # a training step's forward alone ("eager:forward")
        if mode in ("", "eager"):
            call = judged(self.training, self.eager)
        else:
            if mode not in self.compiled:
                import torch

                from kbench.baselines.modes import get_mode

                compiled = torch.compile(self.eager, mode=get_mode(mode).compile_mode)
                self.compiled[mode] = judged(self.training, compiled)
            call = self.compiled[mode]
        return call.forward_only if forward else call


if __name__ == "__main__":
    sys.exit(main(ReferenceRole))
