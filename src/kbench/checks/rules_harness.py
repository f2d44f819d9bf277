"""Rules against reaching the harness: importing kbench or `__main__`, frames by any route, attribute names
computed to hide what they read, and symbol lookup or the interpreter's C API from native code.

None of these can change a verdict any more (every number of a verdict is decided in the referee, a
process the candidate never runs in), so they are a first filter with a clear message, not the wall.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from kbench.checks.context import CheckContext, matches
from kbench.checks.registry import Hit, register_rule

# Modules that are the harness itself, or the script that started the process.
_HARNESS_MODULES = ("kbench", "__main__", "__mp_main__")
# Modules whose purpose is walking stacks or loading modules by computed name.
_FRAME_MODULES = ("traceback", "faulthandler", "importlib", "pkgutil", "runpy", "cffi")
_IMPORT_CALLS = ("importlib.import_module", "importlib.__import__", "__import__", "runpy.run_module")
# Attributes that lead to a frame, a code object or a namespace the candidate was not given.
_FRAME_ROUTES = {
    "__traceback__",
    "tb_frame",
    "tb_next",
    "f_back",
    "f_locals",
    "f_globals",
    "f_builtins",
    "f_code",
    "f_trace",
    "gi_frame",
    "cr_frame",
    "ag_frame",
    "__globals__",
    "__builtins__",
    "__code__",
    "__closure__",
    "__subclasses__",
    "__getattribute__",
    "__dict__",
    "__loader__",
    "__spec__",
}
_FRAME_CALLS = ("sys.exc_info", "sys.exception", "sys._getframe", "sys._current_frames", "sys.last_traceback")
_ATTR_FUNCTIONS = ("getattr", "setattr", "delattr", "hasattr", "builtins.getattr", "operator.attrgetter")


def _literal(ctx: CheckContext, node: ast.expr) -> str | None:
    """A string the expression surely is: a literal, or a module-level name bound once to a literal."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        bound = [
            s.value
            for s in ctx.tree.body
            if isinstance(s, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == node.id for t in s.targets)
        ]
        if len(bound) == 1:
            return _literal(ctx, bound[0])
    return None


def _computed(node: ast.expr) -> bool:
    """Whether a name is assembled at run time (joined, formatted, decoded, indexed) rather than held."""
    return isinstance(node, ast.BinOp | ast.JoinedStr | ast.Call | ast.Subscript | ast.IfExp | ast.BoolOp)


@register_rule("harness-import")
def harness_import(ctx: CheckContext) -> Iterator[Hit]:
    """Importing kbench or `__main__` hands a candidate the harness's own modules (its clock, its loop, its
    result writer) to rebind; importing by a computed name (`importlib`, `__import__`) hides which
    module it is. A kernel imports torch, triton and the standard library's plain modules by name."""
    for mod, line in ctx.imported_modules:
        if matches(mod, _HARNESS_MODULES):
            yield Hit(line, f"imports {mod} (the harness's own code)")
        elif matches(mod, _FRAME_MODULES):
            yield Hit(line, f"imports {mod} (stacks, frames or modules by computed name)")
    for call in ctx.calls:
        name = ctx.call_name(call)
        if matches(name, _IMPORT_CALLS):
            target = _literal(ctx, call.args[0]) if call.args else None
            shown = repr(target) if target is not None else "a computed name"
            yield Hit(call.lineno, f"calls {name}({shown}) (imports a module by name at run time)")


@register_rule("frame-access")
def frame_access(ctx: CheckContext) -> Iterator[Hit]:
    """Frames, tracebacks and function internals reach the harness's locals (a loop's list of times, the
    caller's inputs) by any route: `sys.exc_info()`, an exception's `__traceback__`, a generator's
    frame, or `getattr(x, "f_" + "back")`. Attribute names built at run time are rejected because
    they exist only to hide what is read; a kernel names its attributes."""
    for node in ctx.nodes:
        if isinstance(node, ast.Attribute) and node.attr in _FRAME_ROUTES:
            yield Hit(node.lineno, f"reads .{node.attr} (frames, code or namespaces of other code)")
        elif isinstance(node, ast.Attribute) and matches(ctx.qualname(node), _FRAME_CALLS):
            yield Hit(node.lineno, f"uses {ctx.qualname(node)} (the interpreter's frames)")
    for call in ctx.calls:
        name = ctx.call_name(call)
        if not matches(name, _ATTR_FUNCTIONS):
            continue
        index = 0 if name == "operator.attrgetter" else 1
        if len(call.args) <= index:
            continue
        arg = call.args[index]
        text = _literal(ctx, arg)
        if text is not None and (set(text.split(".")) & _FRAME_ROUTES or text.startswith("__")):
            yield Hit(call.lineno, f"calls {name}(..., {text!r}) (a frame route or a dunder by name)")
        elif text is None and _computed(arg):
            yield Hit(call.lineno, f"calls {name} with an attribute name computed at run time")


# Native code that looks symbols up, reaches the interpreter's C API or another process's memory.
_NATIVE = re.compile(
    r"\b(dlsym|dlopen|dlvsym|dladdr|dl_iterate_phdr|ptrace|process_vm_readv|process_vm_writev"
    r"|PyImport_\w+|PyRun_\w+|Py_CompileString\w*|PyEval_\w+|PyFrame_\w+|PyThreadState_\w+"
    r"|PyInterpreterState_\w+|PySys_\w+|_PyObject_\w+)\b"
)
_NATIVE_IMPORT = re.compile(r"(module_?)::import\s*\(")
_PROC_SELF = re.compile(r"/proc/(self|\d+|thread-self)/(mem|maps|task|environ)")


@register_rule("native-lookup")
def native_lookup(ctx: CheckContext) -> Iterator[Hit]:
    """Native code can do what the Python rules forbid: find a symbol in the harness's libraries
    (`dlsym`), import a module or walk frames through the interpreter's C API (`PyImport_*`,
    `PyEval_GetFrame`, pybind11's `module_::import`), or read its own process's memory map. A kernel's
    native code computes on the tensors it is given and needs none of these."""
    for cs in ctx.code_strings:
        if m := _NATIVE.search(cs.text):
            yield Hit(cs.line, f"C/C++ source uses {m.group(1)} (symbol lookup or the interpreter's C API)")
        if m := _NATIVE_IMPORT.search(cs.text):
            yield Hit(
                cs.line, f"C/C++ source calls {m.group(0).rstrip('(').strip()} (imports a Python module)"
            )
    for node in ctx.nodes:
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and (m := _PROC_SELF.search(node.value))
        ):
            yield Hit(node.lineno, f"names {m.group(0)} (a process's memory, threads or environment)")
