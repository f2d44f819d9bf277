"""tests/llm/server.py loaded under one module name, for tests outside tests/llm (which use its conftest)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

NAME = "kbench_tests_llm_server"  # the name tests/llm/conftest.py registers too: one module either way


def load_server_module() -> ModuleType:
    if NAME not in sys.modules:
        spec = importlib.util.spec_from_file_location(NAME, Path(__file__).parent / "llm" / "server.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[NAME] = module  # dataclasses look their module up by name
        spec.loader.exec_module(module)
    return sys.modules[NAME]
