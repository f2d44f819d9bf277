# The batch-together attack (docs/anti-cheat.md) on a GPU, for tiny_gelu_problem.py: the honest Triton GELU,
# and the runner's Run handler rebound (static checks off) so that a batch's calls run as one launch over
# their stacked inputs, each output right. benchmarks/batch_together.py sets it against its honest twin.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gelu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    inner = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    t = 2.0 * tl.sigmoid(2.0 * inner) - 1.0
    tl.store(y_ptr + offs, 0.5 * x * (1.0 + t), mask=m)


def gelu(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    n = x.numel()
    gelu_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
    return y


class ModelNew(nn.Module):
    def forward(self, x):
        return gelu(x)


import kbench.worker.runner as runner  # noqa: E402

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


runner.Server.run = _together
