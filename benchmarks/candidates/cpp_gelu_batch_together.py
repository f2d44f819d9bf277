# The batch-together attack (docs/anti-cheat.md) on the CPU, for tiny_gelu_problem.py: prepended with its
# honest twin (cpp_gelu_honest.py, whose `ext` it calls), it rebinds the runner's Run handler (static checks
# off) so that a batch's calls run as one extension call over their stacked inputs, each output right.
# benchmarks/batch_together.py sets it against the twin.
# ruff: noqa: F821
import torch

import kbench.worker.runner as runner

_run = runner.Server.run


def _together(self, cmd):
    if len(cmd.inputs) <= 1:
        return _run(self, cmd)
    xs = [self._inputs(slot, literals)[0] for slot, literals in cmd.calls()]
    first = cmd.model_copy(update={"inputs": cmd.inputs[:1], "which": cmd.which[:1], "outputs": []})
    one = _run(self, first)  # one call as the runner makes it: its answer describes the outputs
    if hasattr(one, "which"):
        out = ext.gelu_tanh(torch.cat([x.reshape(-1) for x in xs]))
        self.kept = [[y.view_as(x)] for y, x in zip(out.split([x.numel() for x in xs]), xs, strict=True)]
        if cmd.outputs:
            self._copy_into(cmd.outputs)
        one.which = one.which * len(cmd.inputs)
    return one


runner.Server.run = _together  # type: ignore[method-assign]
