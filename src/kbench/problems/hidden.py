"""Hidden shapes: a second set of sizes per problem, drawn at evaluation time, that no candidate has seen.

A kernel tuned to the sizes in its prompt (a grid that assumes them, a missing bounds check, a size
written into the code) is still correct there; only other sizes show it. `draw` takes the evaluated
preset's sizes and draws smaller ones (so a `full` preset's memory bound still holds) for the constants
that shape the inputs: the module-level integers `get_inputs` reads, directly or through derived constants
(`hidden = 4 * dim`). Constructor-only constants (a kernel size, a reduction dimension, a group count)
stay: the operator is the same, only its inputs' sizes change. Each size is drawn uniformly in
[ceil(v/2), v-1], then, if no such draw is valid, as a multiple of one of v's divisors (window sizes and
head counts must often divide a size); sizes that cannot change with the others keep their value. A draw
is kept when the problem builds and runs on the meta device (shapes checked, nothing allocated: one meta
forward per draw, 20 s for the 386-step LSTM and GRU of level 3, milliseconds for most problems) and its
sizes are none of the problem's presets.

The draw uses the operating system's randomness (`secrets`), per evaluation: the sizes are not in the
problem file, the prompt or the candidate's job, so nothing the candidate can read before its hidden run
predicts them. A problem without such sizes, or whose every draw fails, gets a reason instead
(`Hidden.reason`), and so does one that declares `KBENCH_HIDDEN = "why its sizes cannot change"`.
"""

from __future__ import annotations

import ast
import random
import secrets
from dataclasses import dataclass
from typing import Any

from kbench.problems.format import parse_problem
from kbench.problems.loader import build_model, load, preset_overrides, where
from kbench.types import Problem

HIDDEN = "hidden"  # the preset name the hidden sizes run under
DRAWS = 8  # draws of each kind (uniform, then multiples of a divisor) before sizes are tried one at a time


@dataclass(frozen=True)
class Hidden:
    """The hidden sizes of one problem under one preset, or why there are none. `sizes`: the drawn ones;
    `overrides`: the whole hidden preset (the evaluated preset's overrides, then the drawn sizes)."""

    sizes: tuple[tuple[str, int], ...] = ()
    overrides: tuple[tuple[str, Any], ...] = ()
    reason: str = ""

    @property
    def available(self) -> bool:
        return bool(self.sizes)


def _input_names(tree: ast.Module) -> set[str]:
    """Module-level names `get_inputs` reads, closed over the module-level assignments they come from."""
    assigns: dict[str, ast.expr] = {}
    wanted: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            assigns[node.targets[0].id] = node.value
        elif isinstance(node, ast.FunctionDef) and node.name == "get_inputs":
            wanted |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    todo = list(wanted)
    while todo:
        value = assigns.get(todo.pop())
        for n in ast.walk(value) if value is not None else ():
            if isinstance(n, ast.Name) and n.id not in wanted:
                wanted.add(n.id)
                todo.append(n.id)
    return wanted


def declared_reason(problem: Problem) -> str:
    """The reason a problem gives for having no hidden sizes (`KBENCH_HIDDEN = "..."`), else ''."""
    return parse_problem(problem.code, where(problem)).hidden_reason


def scalable_sizes(problem: Problem, preset: str) -> dict[str, int]:
    """The integer constants (>= 2 under `preset`) that shape the inputs, with their values."""
    parsed = parse_problem(problem.code, where(problem))
    names = _input_names(ast.parse(problem.code))
    sizes = load(problem, preset).sizes
    return {
        n: v
        for n, v in sizes.items()
        if n in names and n in parsed.constants and type(v) is int and v >= 2  # literals; not bools
    }


def _meta_error(problem: Problem, overrides: dict[str, Any]) -> str:
    """'' when the problem builds and runs under `overrides` on the meta device, else the error."""
    import torch

    try:
        loaded = load(with_preset(problem, overrides), HIDDEN)
        with torch.device("meta"):
            outputs = loaded.judged(build_model(loaded))(*loaded.get_inputs())
    except NotImplementedError:
        return ""  # an operator without a meta kernel: the reference worker is the check
    except Exception as exc:  # any other failure means these sizes are not valid for the operator
        return f"{type(exc).__name__}: {exc}"[:300]
    del outputs
    return ""


def _presets_values(problem: Problem, preset_sizes: dict[str, int]) -> list[dict[str, Any]]:
    parsed = parse_problem(problem.code, where(problem))
    full = {n: parsed.constants.get(n) for n in preset_sizes}
    return [full] + [{n: over.get(n, full[n]) for n in preset_sizes} for over in parsed.presets.values()]


def _uniform(v: int, rng: random.Random) -> int:
    return rng.randint((v + 1) // 2, v - 1)


def _structured(v: int, rng: random.Random) -> int:
    """A multiple of one of v's divisors (window sizes, heads, strides often must divide a size)."""
    divisors = [d for d in range(2, v // 2 + 1) if v % d == 0] or [1]
    d = rng.choice(divisors)
    return d * rng.randint(-(-((v + 1) // 2) // d), (v - 1) // d)


@dataclass(frozen=True)
class _Space:
    """What a draw needs: the evaluated preset's overrides and scalable sizes, and every preset's sizes."""

    problem: Problem
    preset: dict[str, Any]
    base: dict[str, int]
    known: list[dict[str, Any]]


def _try(space: _Space, names: list[str], rng: random.Random) -> tuple[dict[str, int] | None, str]:
    """Up to DRAWS uniform draws, then as many structured ones: the first that runs, or the last error."""
    error = "every draw was a preset's sizes"
    for pick in [_uniform] * DRAWS + [_structured] * DRAWS:
        drawn = {n: pick(space.base[n], rng) for n in names}
        if any(all(drawn[n] == k.get(n) for n in names) for k in space.known):
            continue  # the sizes of a preset: not hidden
        error = _meta_error(space.problem, {**space.preset, **drawn})
        if not error:
            return drawn, ""
    return None, error


def draw(problem: Problem, preset: str, rng: random.Random | None = None) -> Hidden:
    """Hidden sizes for `problem` evaluated under `preset`: each input size drawn in [ceil(v/2), v-1]."""
    reason = declared_reason(problem)
    if reason:
        return Hidden(reason=reason)
    rng = rng or random.Random(secrets.randbits(64))
    base = scalable_sizes(problem, preset)
    if not base:
        return Hidden(reason="get_inputs reads no module-level integer size of 2 or more")
    space = _Space(problem, preset_overrides(problem, preset), base, _presets_values(problem, base))
    names = sorted(base)
    found, error = _try(space, names, rng)
    if found is None:  # some size cannot change alone or with the others: keep those that can
        names = [n for n in names if _try(space, [n], rng)[0] is not None]
        found, error = _try(space, names, rng) if names else (None, error)
    if found is None:
        return Hidden(reason=f"no valid smaller sizes in {2 * DRAWS} draws ({error})")
    return Hidden(sizes=tuple(sorted(found.items())), overrides=tuple({**space.preset, **found}.items()))


def with_preset(problem: Problem, overrides: dict[str, Any], name: str = HIDDEN) -> Problem:
    """The problem with `overrides` as preset `name`: its code with KBENCH_PRESETS assigned again at the end
    (the loader and the workers read the last assignment), line numbers of the original kept."""
    from dataclasses import replace

    parsed = parse_problem(problem.code, where(problem))
    presets = {**parsed.presets, name: dict(overrides)}
    code = problem.code.rstrip("\n") + f"\n\nKBENCH_PRESETS = {presets!r}\n"
    return replace(problem, code=code, presets=tuple(presets))
