"""What every static rule reads: the candidate's AST, resolved import aliases and embedded C/C++/CUDA text.

The candidate is parsed, never imported or executed. Names are resolved through its imports (`import
torch.nn.functional as F` makes `F.gelu` read as `torch.nn.functional.gelu`) and through simple
module-level aliases (`Ev = torch.cuda.Event`), so a renamed import does not hide a patched timer.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from functools import cached_property

# A string literal is treated as C/C++/CUDA source when it holds one of these markers; plain prose
# strings (docstrings, messages) are then not scanned for C-level patterns.
_CODE_MARKERS = re.compile(
    r"__global__|#include|#pragma|torch::|at::|PYBIND11|\bvoid\s+\w+\s*\(|\bfloat\s*\*"
)
_LINE_COMMENT = re.compile(r"//[^\n]*")
_BLOCK_COMMENT = re.compile(r"/\*.*?\*/", re.DOTALL)


@dataclass(frozen=True)
class CodeString:
    """One string literal holding C/C++/CUDA source, with comments removed (so `// fork()` is no call)."""

    text: str
    line: int


def strip_c_comments(text: str) -> str:
    return _LINE_COMMENT.sub("", _BLOCK_COMMENT.sub("", text))


def _import_aliases(tree: ast.Module) -> dict[str, str]:
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                # `import torch.nn` binds `torch`; `import torch.nn as nn` binds `nn` to the full path.
                local = a.asname or a.name.split(".")[0]
                aliases[local] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                if a.name != "*":
                    aliases[a.asname or a.name] = f"{node.module}.{a.name}"
    return aliases


@dataclass
class CheckContext:
    """The parsed candidate plus derived views shared by all rules (computed once, lazily)."""

    source: str
    backend: str
    dtype: str
    tree: ast.Module
    aliases: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, source: str, backend: str, dtype: str) -> CheckContext:
        """Parse `source`; raises SyntaxError (run_checks turns it into the `syntax` finding)."""
        tree = ast.parse(source)
        ctx = cls(source=source, backend=backend, dtype=dtype, tree=tree, aliases=_import_aliases(tree))
        ctx._add_assignment_aliases()
        return ctx

    def _add_assignment_aliases(self) -> None:
        # Module-level `Ev = torch.cuda.Event` makes `Ev.elapsed_time = f` a patch of torch.cuda.Event.
        for node in self.tree.body:
            if (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
            ):
                target = self.qualname(node.value)
                if target and target.split(".")[0] in _ALIASABLE_ROOTS:
                    self.aliases.setdefault(node.targets[0].id, target)

    def qualname(self, node: ast.AST) -> str | None:
        """Dotted name of a Name/Attribute chain with aliases resolved, e.g. `F.gelu` -> torch.nn.functional.gelu."""
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        parts.append(self.aliases.get(node.id, node.id))
        return ".".join(reversed(parts))

    def call_name(self, call: ast.Call) -> str | None:
        return self.qualname(call.func)

    @cached_property
    def nodes(self) -> tuple[ast.AST, ...]:
        return tuple(ast.walk(self.tree))

    @cached_property
    def calls(self) -> tuple[ast.Call, ...]:
        return tuple(n for n in self.nodes if isinstance(n, ast.Call))

    @cached_property
    def code_strings(self) -> tuple[CodeString, ...]:
        found = []
        for n in self.nodes:
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and _CODE_MARKERS.search(n.value):
                found.append(CodeString(strip_c_comments(n.value), n.lineno))
        return tuple(found)

    @cached_property
    def imported_modules(self) -> tuple[tuple[str, int], ...]:
        """Every module the candidate imports, with its line (`from a.b import c` lists `a.b`)."""
        mods: list[tuple[str, int]] = []
        for n in self.nodes:
            if isinstance(n, ast.Import):
                mods.extend((a.name, n.lineno) for a in n.names)
            elif isinstance(n, ast.ImportFrom) and n.module and n.level == 0:
                mods.append((n.module, n.lineno))
                mods.extend((f"{n.module}.{a.name}", n.lineno) for a in n.names)
        return tuple(mods)

    def module_list_value(self, node: ast.AST) -> tuple[str, ...]:
        """String items of a list/tuple literal, or of a module-level name bound to one."""
        if isinstance(node, ast.Name):
            for stmt in self.tree.body:
                if isinstance(stmt, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == node.id for t in stmt.targets
                ):
                    return self.module_list_value(stmt.value)
            return ()
        if isinstance(node, ast.List | ast.Tuple):
            return tuple(
                e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)
            )
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return (node.value,)
        return ()


_ALIASABLE_ROOTS = {
    "torch",
    "time",
    "triton",
    "os",
    "sys",
    "gc",
    "inspect",
    "threading",
    "ctypes",
    "builtins",
}


def matches(name: str | None, prefixes: tuple[str, ...]) -> bool:
    """True when dotted `name` equals one of `prefixes` or lies under it (`torch.cuda` covers torch.cuda.X)."""
    if not name:
        return False
    return any(name == p or name.startswith(p + ".") for p in prefixes)
