"""Instantiate a problem under a shape preset: exec its code in a fresh module.

A preset overrides module-level size constants by rewriting their assignments in the syntax tree before
execution, so constants derived from them (`hidden = 4 * dim`) follow, and nothing leaks between problems:
every load is a new module object. This is trusted code (our suite, or a user's reference problems);
candidate code never goes through here (see worker/candidate.py).
"""

from __future__ import annotations

import ast
import difflib
import linecache
import sys
import types
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kbench.errors import ProblemError
from kbench.problems.format import FULL, PARSE_LOCK, parse_problem, parse_tree
from kbench.problems.training import Training, judged
from kbench.types import Problem

_counter = 0


@dataclass
class LoadedProblem:
    problem: Problem
    preset: str
    module: types.ModuleType
    sizes: dict[str, Any]
    training: Training | None = None

    def judged(self, model: Any) -> Any:
        """What is called to judge this problem on `model` (built and cast): the model itself, or a
        training problem's step (forward and backward, problems/training.py)."""
        return judged(self.training, model)

    def gradient_count(self) -> int:
        """How many of a step's outputs are gradients (its last ones): 0 for an inference problem. The
        model is built on the meta device: its parameters are counted, never allocated."""
        if self.training is None:
            return 0
        import torch

        from kbench.problems.training import trainable

        with torch.device("meta"):
            return len(self.training.grad_inputs) + len(trainable(build_model(self)))

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


# A problem that lacks the preset asked for (every upstream KernelBench file lacks `small`, a file may
# have no `medium`) runs at its `full` sizes, the ones its file sets: `preset_note` says so, and the
# verdict names `full`. Only a name no problem of a selection has, close to one that exists, stops a run
# (`check_preset`): `smal` is a typo, not a preset.
TYPO_CUTOFF = 0.75  # difflib ratio: `smal`/`small` 0.89, `ful`/`full` 0.86, `medium`/`small` 0.18


def preset_used(problem: Problem, preset: str) -> str:
    """The preset `problem` runs at when `preset` is asked for: that one if it has it, else `full`."""
    return preset if preset in parse_problem(problem.code, where(problem)).presets else FULL


def preset_overrides(problem: Problem, preset: str) -> dict[str, Any]:
    return parse_problem(problem.code, where(problem)).presets.get(preset_used(problem, preset), {})


def preset_note(problem: Problem, preset: str) -> str:
    """One line when `problem` runs at its file's own sizes for lack of `preset`; '' otherwise."""
    if preset_used(problem, preset) == preset:
        return ""
    return f"{problem.key} has no `{preset}` preset: it runs at the sizes its file sets"


def check_preset(problems: Iterable[Problem], preset: str) -> None:
    """ProblemError when `preset` is likely a typo: no problem of the selection has it, and it is close to
    a preset one has (or to `full` or `small`), listing the presets that exist."""
    known = {FULL, "small"} | {name for p in problems for name in p.presets}
    if preset in known:
        return
    by_lower = {name.lower(): name for name in known}
    close = difflib.get_close_matches(preset.lower(), list(by_lower), n=1, cutoff=TYPO_CUTOFF)
    if close:
        raise ProblemError(
            f"no selected problem has a preset {preset!r}; did you mean {by_lower[close[0]]!r}? "
            f"(presets: {', '.join(sorted(known))})"
        )


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
    tree = _rewrite(parse_tree(problem.code, filename), overrides)
    _counter += 1
    module = types.ModuleType(f"kbench_problem_{_counter}")
    module.__file__ = filename
    linecache.cache[filename] = (len(problem.code), None, problem.code.splitlines(True), filename)
    sys.modules[module.__name__] = module  # dataclasses and pickling look modules up by name
    try:
        with PARSE_LOCK:  # compiling a tree converts it back, as parsing does (format.PARSE_LOCK)
            code = compile(tree, filename, "exec")
        exec(code, module.__dict__)
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
    return LoadedProblem(problem=problem, preset=preset, module=module, sizes=sizes, training=parsed.training)


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
