"""Fixtures for the LLM tests: the local wire-format server (tests/llm/server.py)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def load_server_module() -> ModuleType:
    """tests/llm/server.py under one module name, however the test that needs it was collected."""
    name = "kbench_tests_llm_server"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name("server.py"))
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up by name
        spec.loader.exec_module(module)
    return sys.modules[name]
