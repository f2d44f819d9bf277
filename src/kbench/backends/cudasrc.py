"""Read CUDA code out of a candidate's text: its string literals, and the kernels within them."""

from __future__ import annotations

import ast
import re

_TORCH_INCLUDE = re.compile(r"^\s*#\s*include\s*[<\"](torch|ATen|c10|pybind11)/", re.M)
_DEVICE_START = re.compile(r"(template\s*<[^>]*>\s*)?(__global__|__device__|__forceinline__\s+__device__)\b")


def cuda_strings(source: str) -> list[str]:
    """String constants of the module that contain a `__global__` function (the CUDA sources)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and "__global__" in node.value:
            found.append(node.value)
    return found


def _matching_brace(text: str, start: int) -> int:
    """Index after the brace block that starts at the first `{` from `start`; -1 if unbalanced."""
    open_at = text.find("{", start)
    if open_at < 0:
        return -1
    depth = 0
    for i in range(open_at, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return i + 1
    return -1


def _preamble(text: str) -> list[str]:
    keep = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#") and not _TORCH_INCLUDE.match(line):
            keep.append(line)
    return keep


def kernels_only(text: str) -> str:
    """The non-torch preprocessor lines plus every `__global__`/`__device__` function, in order."""
    parts = [
        "#include <cuda_runtime.h>",
        "#include <cuda_fp16.h>",
        "#include <cuda_bf16.h>",
        *_preamble(text),
    ]
    pos = 0
    while True:
        m = _DEVICE_START.search(text, pos)
        if m is None:
            break
        end = _matching_brace(text, m.end())
        if end < 0:
            break
        signature_end = text.find("{", m.end())
        if ";" in text[m.end() : signature_end]:  # a declaration, not a definition
            pos = m.end()
            continue
        parts.append(text[m.start() : end])
        pos = end
    return "\n".join(parts) + "\n"
