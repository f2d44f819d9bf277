"""`cpp`: C++ (OpenMP) extensions built by the candidate's own `load_inline` call, run on the CPU."""

from __future__ import annotations

import ast
import re
import shutil
from typing import Any

from kbench.backends import Backend, register_backend
from kbench.errors import ConfigError

_LOAD_INLINE = "torch.utils.cpp_extension.load_inline"
_PYBIND_DEF = re.compile(r"\.def\(\s*\"([A-Za-z_]\w*)\"")


def _load_inline_calls(ctx: Any) -> list[ast.Call]:
    """The source's calls of torch.utils.cpp_extension.load_inline, by any import of it, or by the bare
    name where no import defined it (a candidate that forgot the import)."""
    found = []
    for call in ctx.calls:
        name = ctx.call_name(call) or ""
        bare = (
            isinstance(call.func, ast.Name)
            and call.func.id == "load_inline"
            and "load_inline" not in ctx.aliases
        )
        if name == _LOAD_INLINE or name.startswith(_LOAD_INLINE + ".") or bare:
            found.append(call)
    return found


@register_backend("cpp")
class CppBackend(Backend):
    title = "C++"
    prompt_title = "C++ (CPU)"
    default_on = "cpu"
    missing_kernel = "no C++ function exported by load_inline(functions=[...]) or PYBIND11 m.def"
    detect_rank = 2

    def find_kernels(self, ctx: Any) -> list[str]:
        """Functions exported by `load_inline(functions=[...])` and by `m.def("name", ...)` in PYBIND11
        blocks."""
        names: list[str] = []
        for call in _load_inline_calls(ctx):
            for kw in call.keywords:
                if kw.arg == "functions":
                    names.extend(ctx.module_list_value(kw.value))
        for cs in ctx.code_strings:
            if "PYBIND11_MODULE" in cs.text:
                names.extend(_PYBIND_DEF.findall(cs.text))
        return names

    def version(self) -> str | None:
        from kbench.hardware import command_output

        compiler = shutil.which("c++") or shutil.which("g++")
        out = command_output([compiler, "--version"]).strip() if compiler is not None else ""
        return out.splitlines()[0].strip() if out else None

    def check_environment(self, device: str) -> None:
        if device != "cpu":
            raise ConfigError(f"the cpp backend runs on the CPU; use --device cpu (got {device!r})")
        if shutil.which("ninja") is None:
            raise ConfigError("load_inline needs ninja: pip install ninja (or apt-get install ninja-build)")
        if shutil.which("c++") is None and shutil.which("g++") is None:
            raise ConfigError("load_inline needs a C++ compiler: apt-get install g++ (or set CXX)")
