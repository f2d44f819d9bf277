"""`cpp`: C++ (OpenMP) extensions built by the candidate's own `load_inline` call, run on the CPU."""

from __future__ import annotations

import shutil

from kbench.backends import Backend, register_backend
from kbench.errors import ConfigError


@register_backend("cpp")
class CppBackend(Backend):
    def check_environment(self, device: str) -> None:
        if device != "cpu":
            raise ConfigError(f"the cpp backend runs on the CPU; use --device cpu (got {device!r})")
        if shutil.which("ninja") is None:
            raise ConfigError("load_inline needs ninja: pip install ninja (or apt-get install ninja-build)")
        if shutil.which("c++") is None and shutil.which("g++") is None:
            raise ConfigError("load_inline needs a C++ compiler: apt-get install g++ (or set CXX)")
