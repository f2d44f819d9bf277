"""Read a KernelBench-format problem file without executing it.

A problem defines `class Model(nn.Module)`, `get_inputs()` and `get_init_inputs()`, with sizes as
module-level constants. kbench metadata are optional module-level literals that upstream ignores:

    KBENCH_PRESETS = {"small": {"batch_size": 4, "dim": 64}}   # overrides of size constants by name
    KBENCH_TAGS = ["gemm-epilogue", "activation"]                # fusion-pattern tags
    KBENCH_TOLERANCE = {"fp32": 1e-4, "bf16": 2e-2}              # per-dtype tolerance (problems/compare.py)
    KBENCH_HIDDEN = "the operator needs these exact sizes"       # why it has no hidden shapes (hidden.py)
    KBENCH_TRAINING = {"upstream": 1, "grad_inputs": [0]}        # a training problem (training.py)

The module-level values are the `full` preset; every named preset may override only names that are
assigned at module level, so a typo is an error rather than a silent no-op.
"""

from __future__ import annotations

import ast
import threading
from dataclasses import dataclass, field
from typing import Any

from kbench.errors import ProblemError
from kbench.problems import training as training_mod
from kbench.types import DTYPES

REQUIRED_FUNCTIONS = ("get_inputs", "get_init_inputs")
# CPython 3.11's parser keeps its AST recursion depth per interpreter, not per thread: two threads parsing
# at once (a host counting several problems' FLOPs) can fail with "AST constructor recursion depth
# mismatch". Every parse of a problem's text takes this lock.
PARSE_LOCK = threading.Lock()


def parse_tree(code: str, where: str) -> ast.Module:
    """`ast.parse` of a problem's text, one thread at a time (PARSE_LOCK)."""
    with PARSE_LOCK:
        return ast.parse(code, filename=where)


FULL = "full"


@dataclass
class ParsedProblem:
    constants: dict[str, Any] = field(default_factory=dict)  # literal module-level assignments
    assigned: set[str] = field(default_factory=set)  # every module-level assigned name
    presets: dict[str, dict[str, Any]] = field(default_factory=dict)
    tags: tuple[str, ...] = ()
    tolerance: dict[str, float] = field(default_factory=dict)
    hidden_reason: str = ""  # KBENCH_HIDDEN: why the problem has no hidden shapes
    training: training_mod.Training | None = None  # KBENCH_TRAINING: judged forward and backward
    docstring: str = ""


def _literal(node: ast.expr, where: str, name: str) -> Any:
    try:
        return ast.literal_eval(node)
    except ValueError as exc:
        raise ProblemError(f"{where}: {name} must be a literal ({exc})") from None


def parse_problem(code: str, where: str) -> ParsedProblem:
    """Validate the structure of a problem file and read its metadata. `where` names the file in errors."""
    try:
        tree = parse_tree(code, where)
    except SyntaxError as exc:
        raise ProblemError(f"{where}: syntax error at line {exc.lineno}: {exc.msg}") from None
    out = ParsedProblem(docstring=ast.get_docstring(tree) or "")
    classes, functions = set(), set()
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            classes.add(node.name)
        elif isinstance(node, ast.FunctionDef):
            functions.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    out.assigned.add(target.id)
                    if node.value is not None:
                        try:
                            out.constants[target.id] = ast.literal_eval(node.value)
                        except ValueError:
                            pass
    if "Model" not in classes:
        raise ProblemError(f"{where}: no `class Model` defined")
    missing = [f for f in REQUIRED_FUNCTIONS if f not in functions]
    if missing:
        raise ProblemError(f"{where}: missing function(s) {', '.join(missing)}")
    _read_metadata(tree, out, where)
    return out


def _read_metadata(tree: ast.Module, out: ParsedProblem, where: str) -> None:
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            continue
        target = node.targets[0]
        if not isinstance(target, ast.Name) or not target.id.startswith("KBENCH_"):
            continue
        value = _literal(node.value, where, target.id)
        if target.id == "KBENCH_PRESETS":
            out.presets = _check_presets(value, out.assigned, where)
        elif target.id == "KBENCH_TAGS":
            if not isinstance(value, list | tuple) or not all(isinstance(t, str) for t in value):
                raise ProblemError(f"{where}: KBENCH_TAGS must be a list of strings")
            out.tags = tuple(value)
        elif target.id == "KBENCH_TOLERANCE":
            if not isinstance(value, dict) or any(k not in DTYPES for k in value):
                raise ProblemError(f"{where}: KBENCH_TOLERANCE keys must be among {DTYPES}")
            out.tolerance = {k: float(v) for k, v in value.items()}
        elif target.id == "KBENCH_HIDDEN":
            if not isinstance(value, str) or not value.strip():
                raise ProblemError(f"{where}: KBENCH_HIDDEN must be a non-empty string (the reason)")
            out.hidden_reason = value
        elif target.id == training_mod.NAME:
            out.training = training_mod.parse(value, where)


def _check_presets(value: Any, assigned: set[str], where: str) -> dict[str, dict[str, Any]]:
    if not isinstance(value, dict):
        raise ProblemError(f"{where}: KBENCH_PRESETS must be a dict of preset name -> overrides")
    for name, overrides in value.items():
        if not isinstance(overrides, dict):
            raise ProblemError(f"{where}: preset {name!r} must be a dict of constant -> value")
        unknown = sorted(set(overrides) - assigned)
        if unknown:
            raise ProblemError(
                f"{where}: preset {name!r} overrides {', '.join(unknown)}, which the file does not assign"
            )
    return {str(k): dict(v) for k, v in value.items()}
