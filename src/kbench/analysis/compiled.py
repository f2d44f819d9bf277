"""torch.compile's view: which operators inductor fused, the kernels it generated, and their launches.

Inductor skips codegen (and so its fusion log) on a cache hit, so each call compiles with a fresh,
temporary TORCHINDUCTOR_CACHE_DIR. A cold compile costs ~15 s per problem on a CPU.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import tempfile
from dataclasses import asdict, dataclass, field
from typing import Any

_KERNEL_DEF = re.compile(r"^def (triton_\w+)\(|^(cpp_fused_\w+) = async_compile", re.M)
_LAUNCH = re.compile(r"\b(triton_\w+)\.run\(|\b(cpp_fused_\w+)\(|\bextern_kernels\.(\w+)\(")
_FUSING = re.compile(r"fusing (\S+) with (\S+)")
_ROUND = re.compile(r"fused (\d+) nodes into (\d+) nodes")


@dataclass
class CompileView:
    fusions: list[str] = field(default_factory=list)  # "fusing op1 with op2" decisions, in order
    nodes_before: int = 0  # scheduler nodes before the first fusion round
    nodes_after: int = 0  # and after the last
    kernels: list[str] = field(default_factory=list)  # generated fused kernels
    launches: list[str] = field(default_factory=list)  # kernel calls of one forward, in order
    log_lines: int = 0
    kernel_ms: float | None = None  # device time of the compiled forward's kernels (GPU only, profiler)

    @property
    def launch_count(self) -> int:
        return len(self.launches)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"launch_count": self.launch_count}


@contextlib.contextmanager
def _fresh_inductor_cache() -> Any:
    old = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    with tempfile.TemporaryDirectory(prefix="kbench-inductor-") as tmp:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = tmp
        try:
            yield tmp
        finally:
            if old is None:
                os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
            else:
                os.environ["TORCHINDUCTOR_CACHE_DIR"] = old


def _call_body(code: str) -> str:
    """The part of the generated module that runs per forward (`def call(...)`), where launches are."""
    start = code.find("def call(")
    end = code.find("\n\n\n", start)
    return code[start:end] if start >= 0 else ""


def parse_compile(log: str, codes: list[str]) -> CompileView:
    view = CompileView(log_lines=len(log.splitlines()))
    view.fusions = [f"{a} + {b}" for a, b in _FUSING.findall(log)]
    rounds = _ROUND.findall(log)
    if rounds:
        view.nodes_before, view.nodes_after = int(rounds[0][0]), int(rounds[-1][1])
    for code in codes:
        view.kernels += [a or b for a, b in _KERNEL_DEF.findall(code)]
        view.launches += [a or b or f"extern:{c}" for a, b, c in _LAUNCH.findall(_call_body(code))]
    return view


def compile_view(model: Any, inputs: list[Any], device: str = "cpu") -> CompileView:
    """Compile `model` with inductor from a fresh cache and capture its fusion log and generated code; on a
    GPU also profile the compiled forward, as the eager one is, so the two kernel times compare."""
    import torch
    import torch._dynamo
    from torch._inductor.utils import run_and_get_code

    from kbench.analysis.profile import profile_eager

    buf = io.StringIO()
    kernel_ms = None
    with _fresh_inductor_cache(), contextlib.redirect_stderr(buf), torch.no_grad():
        torch._dynamo.reset()
        torch._logging.set_logs(fusion=True)  # the handler binds sys.stderr now, i.e. our buffer
        try:
            compiled = torch.compile(model)
            _, codes = run_and_get_code(compiled, *inputs)
            torch._logging.set_logs()
            if device.startswith("cuda"):
                kernel_ms = sum(r.time_ms for r in profile_eager(compiled, inputs, device).kernels)
        finally:
            torch._logging.set_logs()
            torch._dynamo.reset()
    view = parse_compile(buf.getvalue(), list(codes))
    view.kernel_ms = kernel_ms
    return view
