"""Instantiate a problem under a shape preset: exec its code in a fresh module.

A preset overrides module-level size constants by rewriting their assignments in the syntax tree before
execution, so constants derived from them (`hidden = 4 * dim`) follow, and nothing leaks between problems:
every load is a new module object. This is trusted code (our suite, or a user's reference problems);
candidate code never goes through here (see worker/candidate.py).
"""

from __future__ import annotations

import ast
import linecache
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kbench.errors import ProblemError
from kbench.problems.format import FULL, parse_problem
from kbench.types import Problem

_counter = 0


@dataclass
class LoadedProblem:
    problem: Problem
    preset: str
    module: types.ModuleType
    sizes: dict[str, Any]

    @property
    def Model(self) -> type:  # noqa: N802 - KernelBench's name
        return self.module.Model  # type: ignore[no-any-return]

    @property
    def get_inputs(self) -> Callable[[], list[Any]]:
        return self.module.get_inputs  # type: ignore[no-any-return]

    @property
    def get_init_inputs(self) -> Callable[[], list[Any]]:
        return self.module.get_init_inputs  # type: ignore[no-any-return]


def where(problem: Problem) -> str:
    return problem.path or f"<{problem.key}>"


# Presets kbench picks by itself (`small` on a machine without a GPU): a problem that lacks one, every
# upstream KernelBench file among them, runs at the sizes its file sets (`preset_note` says so). Any other
# preset a problem lacks is a mistake (a typo), and an error.
OWN_SIZES_FOR = frozenset({FULL, "small"})


def preset_overrides(problem: Problem, preset: str) -> dict[str, Any]:
    parsed = parse_problem(problem.code, where(problem))
    if preset in parsed.presets:
        return parsed.presets[preset]
    if preset in OWN_SIZES_FOR:
        return {}
    have = ", ".join([FULL, *[p for p in parsed.presets if p != FULL]])
    raise ProblemError(f"{where(problem)}: no preset {preset!r} (presets: {have})")


def preset_note(problem: Problem, preset: str) -> str:
    """One line when `problem` runs at its file's own sizes for lack of `preset`; '' otherwise."""
    if (
        preset == FULL
        or preset not in OWN_SIZES_FOR
        or preset in parse_problem(problem.code, where(problem)).presets
    ):
        return ""
    return f"{problem.key} has no `{preset}` preset: it runs at the sizes its file sets"


def _rewrite(tree: ast.Module, overrides: dict[str, Any]) -> ast.Module:
    for node in tree.body:
        if isinstance(node, ast.Assign):
            names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            hit = [n for n in names if n in overrides]
            if hit and len(names) == 1:
                node.value = ast.copy_location(ast.Constant(overrides[hit[0]]), node.value)
                if isinstance(overrides[hit[0]], list | tuple | dict):
                    node.value = ast.parse(repr(overrides[hit[0]]), mode="eval").body
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            if node.target.id in overrides:
                node.value = ast.parse(repr(overrides[node.target.id]), mode="eval").body
    return ast.fix_missing_locations(tree)


def load(problem: Problem, preset: str = FULL) -> LoadedProblem:
    """Execute the problem's code under `preset` in a new module; errors name the file."""
    global _counter
    overrides = preset_overrides(problem, preset)
    filename = where(problem)
    tree = _rewrite(ast.parse(problem.code, filename=filename), overrides)
    _counter += 1
    module = types.ModuleType(f"kbench_problem_{_counter}")
    module.__file__ = filename
    linecache.cache[filename] = (len(problem.code), None, problem.code.splitlines(True), filename)
    sys.modules[module.__name__] = module  # dataclasses and pickling look modules up by name
    try:
        exec(compile(tree, filename, "exec"), module.__dict__)
    except Exception as exc:
        sys.modules.pop(module.__name__, None)
        raise ProblemError(f"{filename}: failed to execute: {type(exc).__name__}: {exc}") from exc
    for name in ("Model", "get_inputs", "get_init_inputs"):
        if not hasattr(module, name):
            raise ProblemError(f"{filename}: `{name}` is not defined after execution")
    parsed = parse_problem(problem.code, filename)
    sizes = {
        k: v
        for k, v in vars(module).items()  # execution order
        if k in parsed.assigned and not k.startswith("KBENCH_") and _is_size(v)
    }
    return LoadedProblem(problem=problem, preset=preset, module=module, sizes=sizes)


def _is_size(value: Any) -> bool:
    if isinstance(value, tuple | list):
        return all(_is_size(v) for v in value)
    return isinstance(value, int | float | str | bool)


def build_model(loaded: LoadedProblem, seed: int = 42) -> Any:
    """Construct `Model(*get_init_inputs())` under a fixed seed (KernelBench's init semantics)."""
    import torch

    torch.manual_seed(seed)
    init = loaded.get_init_inputs()
    torch.manual_seed(seed)
    return loaded.Model(*init)
