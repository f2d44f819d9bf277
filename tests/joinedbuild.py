"""One C++ extension for many tested files that each build their own with `load_inline`.

Every C++ build pays about 10 s for torch's and pybind11's headers whatever its code (a trivial add takes
12 s at -O3 on two cores with the header precompiled: the header's deferred template instantiations and
pybind11's module machinery, emitted again in every translation unit). Tests that check what files such
as the shipped cpp solutions compute build all of them as one extension, through kbench's build cache and
with the files' own flags: each file's C++ sources in a namespace of their own (their includes hoisted
above all of them), each of its functions bound as `NAMESPACE::function`. A file then runs as written, its
`load_inline(...)` call answered by its functions in the shared extension, for the exact arguments its
text gives and no others. How kbench builds one candidate is tested by the evaluator's own tests.
"""

from __future__ import annotations

import ast
import hashlib
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

_INCLUDE = re.compile(r"^[ \t]*#[ \t]*include\b[^\n]*$", re.M)


def string_constant(code: str, name: str) -> str:
    for node in ast.parse(code).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            value = ast.literal_eval(node.value)
            assert isinstance(value, str)
            return value
    raise AssertionError(f"no module-level string {name}")


def inline_arguments(code: str) -> dict[str, Any]:
    """The keyword arguments of the one `load_inline(...)` call in `code`, read from its text: literals, or
    the name of a module-level string (its sources)."""
    calls = [
        node
        for node in ast.walk(ast.parse(code))
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "load_inline"
    ]
    assert len(calls) == 1, f"{len(calls)} load_inline calls, not one"
    return {
        kw.arg: string_constant(code, kw.value.id)
        if isinstance(kw.value, ast.Name)
        else ast.literal_eval(kw.value)
        for kw in calls[0].keywords
        if kw.arg is not None
    }


def joined_arguments(calls: list[dict[str, Any]]) -> dict[str, Any]:
    """load_inline's arguments for one extension holding the C++ sources of every call (all with the same
    flags); call i's functions are bound as `kbI::function`."""
    includes: dict[str, None] = {}
    blocks, functions = [], []
    for i, args in enumerate(calls):
        sources = args["cpp_sources"]
        text = "\n".join(sources if isinstance(sources, list) else [sources])
        # a macro or a namespace of its own could change what the joined sources mean
        assert "#define" not in text and "namespace" not in text, f"{args['name']}: needs a build of its own"
        includes.update(dict.fromkeys(line.strip() for line in _INCLUDE.findall(text)))
        blocks.append(
            f"namespace kb{i} {{  // {args['name']}\n{_INCLUDE.sub('', text)}\n}}  // namespace kb{i}"
        )
        functions += [f"kb{i}::{f}" for f in args["functions"]]
    flags = {(tuple(a["extra_cflags"]), tuple(a.get("extra_ldflags", ()))) for a in calls}
    assert len(flags) == 1, f"the files' build flags differ: {flags}"
    cflags, ldflags = flags.pop()
    sources = "\n".join([*includes, *blocks])
    # a name of its own: Python keeps the first extension module of a name a process loads
    name = "kbench_test_joined_" + hashlib.sha256(sources.encode()).hexdigest()[:12]
    return {
        "name": name, "cpp_sources": sources,
        "functions": functions, "extra_cflags": list(cflags), "extra_ldflags": list(ldflags),
    }  # fmt: skip


def build_joined(codes: list[str], cache: Path) -> dict[str, Any]:
    """Build the load_inline calls of `codes` (Python files' text) as one extension through kbench's build
    cache under `cache` (kbench's cache folder). Returns, by each call's `name`, an object whose attributes
    are its functions; and under `"recipe"` the build recipe the extension got."""
    import shutil
    import sys

    import torch.utils.cpp_extension as ext

    from kbench.backends import KernelRecorder
    from kbench.backends.buildcache import install
    from kbench.referee.builds import trusted_request

    if sys.platform == "win32" or shutil.which("ninja") is None:
        pytest.skip("C++ extensions need a C++ toolchain and ninja")
    calls = [inline_arguments(code) for code in codes]
    original, recorder = ext.load_inline, KernelRecorder()
    install(recorder, cache / "builds", trusted_request(cache))
    try:
        module = ext.load_inline(**joined_arguments(calls))
    finally:
        ext.load_inline = original  # type: ignore[assignment]
    found: dict[str, Any] = {"recipe": str(recorder.extra.get("build_recipe"))}
    for i, args in enumerate(calls):
        found[args["name"]] = SimpleNamespace(
            **{f: getattr(module, f"kb{i}::{f}") for f in args["functions"]}
        )
    return found


def answer_load_inline(monkeypatch: pytest.MonkeyPatch, code: str, joined: dict[str, Any]) -> None:
    """Until the test ends, `load_inline` answers the call `code` makes with its functions in `joined`
    (build_joined), and fails any call with other arguments."""
    import torch.utils.cpp_extension as ext

    expected = inline_arguments(code)

    def load_inline(**kwargs: Any) -> Any:
        assert kwargs == expected, "load_inline called with other arguments than the file's text gives"
        return joined[kwargs["name"]]

    monkeypatch.setattr(ext, "load_inline", load_inline)
