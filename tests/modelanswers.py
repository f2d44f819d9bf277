"""What the local test server answers in run tests: a real cpp candidate for level-2 problems 1-3
(Gemm + ReLU / GELU-tanh / SiLU*scale, one extension build for all three), a broken one, or prose."""

from __future__ import annotations

from pathlib import Path
from typing import Any

CANDIDATE = (Path(__file__).parent / "fixtures" / "pipeline" / "gemm_epilogue_cpp.py").read_text()
MODES = {"F.gelu": 1, "F.silu": 2, "torch.relu": 0}
GOOD_LINE = "float v = p[i] + b[i % n];"
BAD_LINE = "float v = p[i] + bb[i % n] + undefined_thing;"  # two compiler errors


def _text(content: Any) -> str:
    return content if isinstance(content, str) else "".join(p.get("text", "") for p in content)


def task(request: Any) -> str:
    """The first user message: the task with the problem's source at its end."""
    return _text(request.messages[0]["content"])


def turn(request: Any) -> int:
    return sum(m["role"] == "assistant" for m in request.messages)


def source_for(request: Any, broken: bool = False) -> str:
    text = task(request)
    problem = text[text.rfind("class Model(") :]  # the problem source comes after the examples
    mode = next(m for marker, m in MODES.items() if marker in problem)
    source = CANDIDATE.replace("MODE,", f"{mode},")
    return source.replace(GOOD_LINE, BAD_LINE) if broken else source


def answer(request: Any, broken: bool = False) -> str:
    return f"Fusing the epilogue into one OpenMP pass.\n\n```python\n{source_for(request, broken)}\n```\n"
