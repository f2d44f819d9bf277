"""Optional packages in test modules: skipped where not installed, imported at their first use.

Every parallel worker imports every test module to collect it, so a package a module imports at its top
(or through `pytest.importorskip` there) is paid by each worker before its first test, whichever worker
then runs that module's tests: `verifiers.v1` and Helion take ~6 s each on two cores. `needs` decides the
skip from the package's presence alone (`importlib.util.find_spec`, no import), and `Lazy` imports the
package when a test first reads one of its names.
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType
from typing import Any

import pytest


def installed(name: str) -> bool:
    """Whether the module `name` (dotted: its parent packages are imported to find it) can be imported."""
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # a parent package missing
        return False


def needs(name: str, reason: str | None = None) -> pytest.MarkDecorator:
    """A mark that skips where `name` is not installed."""
    return pytest.mark.skipif(not installed(name), reason=reason or f"{name} is not installed")


class Lazy:
    """The module `name`, imported when one of its public attributes is first read."""

    def __init__(self, name: str) -> None:
        self._name = name

    @property
    def module(self) -> ModuleType:
        return importlib.import_module(self._name)

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("_"):  # what pytest's collection asks of every module-level name (fixture markers)
            raise AttributeError(attr)
        return getattr(self.module, attr)
