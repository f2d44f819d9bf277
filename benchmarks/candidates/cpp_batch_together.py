# A candidate for problem 2/1 with the C++ extension of tests/fixtures/eval/_cpp_ext.py (prepended to it),
# run with static checks off: it rebinds its runner's Run handler so that a batch of calls is computed at
# once -- every call's rows stacked into one GEMM + ReLU, each call's rows then copied into its own output
# slot -- where the honest runner makes one call per input. Every output is right; only the time per call
# can change (docs/anti-cheat.md, "Run a batch's calls together"). `ext` is the prepended file's extension.
# ruff: noqa: F821
import torch
import torch.nn as nn

import kbench.worker.runner as runner

_run = runner.Server.run


def _together(self, cmd):
    if len(cmd.inputs) <= 1:
        return _run(self, cmd)
    xs = [self._inputs(slot, literals)[0] for slot, literals in cmd.calls()]
    first = cmd.model_copy(update={"inputs": cmd.inputs[:1], "which": cmd.which[:1], "outputs": []})
    one = _run(self, first)  # one call as the runner makes it: its answer's description of the outputs
    if hasattr(one, "which"):
        model = self.role.model(cmd.mode)
        out = ext.gemm_relu(torch.cat(xs), model.linear.weight, model.linear.bias)
        self.kept = [[rows] for rows in out.split([x.shape[0] for x in xs])]
        if cmd.outputs:
            self._copy_into(cmd.outputs)
        one.which = one.which * len(cmd.inputs)
    return one


runner.Server.run = _together  # type: ignore[method-assign]


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return ext.gemm_relu(x, self.linear.weight, self.linear.bias)
