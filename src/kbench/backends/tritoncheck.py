"""Compile recorded Triton launches for a GPU arch in a clean process (worker side, no GPU needed).

`python -m kbench.backends.tritoncheck REQUEST.json` imports the candidate *without* the interpreter,
looks up each launched kernel by its qualified name and compiles it with the argument types and
constexpr values the interpreted dry run saw; it writes `REQUEST.result.json` (ok, log).

Why a separate process: when `TRITON_INTERPRET=1` is set as triton is imported, every `@triton.jit`
function is an `InterpretedFunction` — Triton's own standard library too (`tl.sigmoid`, `tl.cdiv`,
`tl.max` ...). The real compiler inlines those as device functions, and calling an interpreted function
that way patches `triton.language` with the interpreter's builtins and never restores them (Triton 3.7;
3.9 restores on the grid path only). In the interpreted worker `triton.compile` then fails on honest
kernels with `'ir.value' object has no attribute 'dtype'` at the first builtin (`tl.program_id(0) *
BLOCK`). A process that never enabled the interpreter compiles exactly what a GPU host would.

The child runs the candidate's module-level code a second time, inside the worker's process group and
limits; a candidate can fake this check's answer as it can fake anything else the worker reports.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, TypedDict

from kbench import entries
from kbench.backends import CompileCheck

_TIMEOUT_S = 300.0  # one Triton compile is ~1 s on an idle core; imports ~5 s


def _encode(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    name = type(value).__name__
    if name == "dtype" and type(value).__module__.startswith("triton"):
        return {"tl_dtype": str(value)}
    raise TypeError(f"constexpr of type {type(value).__qualname__} cannot be replayed")


def _decode(value: Any) -> Any:
    if isinstance(value, dict) and "tl_dtype" in value:
        import triton.language as tl

        return tl.core.dtype(value["tl_dtype"])
    return value


class Launch(TypedDict):
    name: str  # the kernel's name in the candidate's launches
    qualname: str  # where the child finds it in the candidate's module
    # the file of a kernel defined outside the candidate's (a DSL's generated module: Helion's), where the
    # child finds it instead; "" for the candidate's own
    file: str
    signature: dict[str, str]  # argument types the dry run saw
    constexprs: dict[str, Any]  # constexpr values, encoded (`_encode`)


class CheckRequest(TypedDict):
    candidate_file: str
    cache_dir: str
    arch: str
    launches: list[Launch]
    skipped: list[str]  # launches that cannot be replayed, and why


class CheckResult(TypedDict):
    ok: bool
    log: str


def request(launches: dict[str, Any], candidate_file: str, cache_dir: str, arch: str) -> CheckRequest:
    """The JSON request for the child: where each kernel lives and how it was launched."""
    items: list[Launch] = []
    skipped: list[str] = []
    for name, launch in launches.items():
        try:
            constexprs = {k: _encode(v) for k, v in launch.constexprs.items()}
        except TypeError as exc:
            skipped.append(f"{name}: not compile-checked ({exc})")
            continue
        qualname = launch.fn.__qualname__
        code = getattr(launch.fn, "__code__", None)
        file = code.co_filename if code is not None else ""
        if not file or Path(file).resolve() == Path(candidate_file).resolve():
            file = ""
        items.append(Launch(name=name, qualname=qualname, file=file, signature=launch.signature,
                            constexprs=constexprs))  # fmt: skip
    return CheckRequest(candidate_file=candidate_file, cache_dir=cache_dir, arch=arch, launches=items,
                        skipped=skipped)  # fmt: skip


def compile_in_clean_process(
    launches: dict[str, Any], candidate_file: str, jobdir: Path, cache_dir: str, arch: str = "sm_90"
) -> CompileCheck:
    """Run the child on the recorded launches; a child that dies or hangs is a failed check."""
    t0 = time.perf_counter()
    req = request(launches, candidate_file, cache_dir, arch)
    path = jobdir / "triton_check.json"
    path.write_text(json.dumps(req))
    out = path.with_suffix(".result.json")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    try:
        proc = subprocess.run(
            [sys.executable, "-m", entries.TRITON_CHECK, str(path)],
            env=env,
            capture_output=True,
            text=True,
            timeout=_TIMEOUT_S,
        )
        tail = (proc.stdout + proc.stderr)[-4000:]
    except subprocess.TimeoutExpired:
        return CompileCheck(False, f"compile check exceeded {_TIMEOUT_S:.0f} s", tuple(launches))
    if not out.exists():
        return CompileCheck(False, f"compile check exited {proc.returncode} without a result:\n{tail}")
    res: CheckResult = json.loads(out.read_text())
    log = "\n".join([*req["skipped"], res["log"]]).strip()
    return CompileCheck(bool(res["ok"]), log[-8000:], tuple(launches), time.perf_counter() - t0)


def _find(module: Any, qualname: str) -> Any:
    from triton.runtime.jit import JITFunction

    obj = module
    for part in qualname.split("."):
        if part == "<locals>":
            raise LookupError(f"{qualname} is defined inside a function")
        obj = getattr(obj, part)
    while not isinstance(obj, JITFunction) and hasattr(obj, "fn"):  # autotune/heuristics wrappers
        obj = obj.fn
    return obj if isinstance(obj, JITFunction) else JITFunction(obj)


def _import(candidate_file: str, cache_dir: str) -> Any:
    from kbench.backends import KernelRecorder
    from kbench.backends.buildcache import install

    install(KernelRecorder(), Path(cache_dir) / "builds")  # a mixed candidate loads its cached build
    return _load("kbench_candidate", candidate_file)


def _load(name: str, path: str) -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _module_of(item: Launch, candidate: Any, others: dict[str, Any]) -> Any:
    """The module the launched kernel is defined in: the candidate's, or a generated one, loaded once."""
    file = item.get("file", "")
    if not file:
        return candidate
    if file not in others:
        others[file] = _load(f"kbench_generated_{len(others)}", file)
    return others[file]


def main(argv: list[str]) -> int:
    from kbench.backends.triton import compile_jit

    path = Path(argv[1])
    req: CheckRequest = json.loads(path.read_text())
    module = _import(req["candidate_file"], req["cache_dir"])
    ok, logs = True, []
    generated: dict[str, Any] = {}
    for item in req["launches"]:
        try:
            fn = _find(_module_of(item, module, generated), item["qualname"])
        except (LookupError, AttributeError, OSError) as exc:
            logs.append(f"{item['name']}: not compile-checked ({exc})")
            continue
        constexprs = {k: _decode(v) for k, v in item["constexprs"].items()}
        error = compile_jit(fn, item["signature"], constexprs, req["arch"])
        ok = ok and error is None
        logs.append(f"{item['name']}: " + (error or f"compiled for {req['arch']}"))
    path.with_suffix(".result.json").write_text(json.dumps(CheckResult(ok=ok, log="\n".join(logs))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
