# The batch-together attack (docs/anti-cheat.md) on a GPU, for tiny_gelu_problem.py: prepended with its honest
# twin (triton_gelu_honest.py, whose `gelu` it calls), it rebinds the runner's Run handler (static checks off)
# so that a batch's calls run as one launch over their stacked inputs, each output right.
# benchmarks/batch_together.py sets it against the twin.
# ruff: noqa: F821
import torch

import kbench.worker.runner as runner

_run = runner.Server.run


def _together(self, cmd):
    # every call of the batch in one launch: their inputs are in their slots before the command comes
    if len(cmd.inputs) <= 1:
        return _run(self, cmd)
    xs = [self._inputs(slot, literals)[0] for slot, literals in cmd.calls()]
    first = cmd.model_copy(update={"inputs": cmd.inputs[:1], "which": cmd.which[:1], "outputs": []})
    one = _run(self, first)
    if hasattr(one, "which"):
        out = gelu(torch.cat([x.reshape(-1) for x in xs]))
        self.kept = [[o.view_as(x)] for o, x in zip(out.split([x.numel() for x in xs]), xs, strict=True)]
        if cmd.outputs:
            self._copy_into(cmd.outputs)
        self._sync()
        one.which = one.which * len(cmd.inputs)
    return one


runner.Server.run = _together  # type: ignore[method-assign]
