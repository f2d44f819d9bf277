"""Compile a CuTe DSL candidate for a GPU arch without a GPU, in a clean process.

`python -m kbench.backends.cutecheck FILE [PROBLEM_FILE] [--arch sm_90]` prints the result as JSON;
`check_source` (CuteBackend.compile_check) runs it on a source text.

What is checked: the child sets the DSL's compile-only settings before `cutlass` is imported
(`CUTE_DSL_ARCH`, `CUTE_DSL_KEEP=ptx`, a dump folder of its own) and then
1. imports the candidate's module: every `cute.compile(...)` it runs at import is lowered to PTX;
2. with a problem file, builds `ModelNew(*get_init_inputs())` and runs one forward on the problem's CPU
   inputs, so each `cute.compile(host_fn, from_dlpack(x), ...)` the forward runs compiles with the
   problem's shapes and dtypes. Calls of the compiled functions do nothing there (there is no GPU to run
   them; outputs are left as allocated) and `torch.cuda.current_stream()` answers a stand-in for stream 0.
The check passes when all of that ran without an error and at least one jit function was lowered; its
`kernels` are the `.entry` symbols of the PTX written. Not checked: that a kernel is right, that it runs
(launch configuration, shared memory size, alignment faults show only on a GPU), and code paths the one
forward did not take. `ptxas` runs too (the DSL makes a cubin), so register and resource errors of the
target arch are caught. The child runs the candidate's code: only for sources kbench would run anyway.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from kbench.backends import CompileCheck
from kbench.backends.dryrun import feature_arch, forward_once, load_module

_TIMEOUT_S = 300.0  # importing cutlass takes 3-11 s on a busy core; one small jit function ~0.3 s
_CHILD = "KBENCH_CUTE_CHECK_CHILD"  # set in the child's environment: it compiles, it does not start one
_ENTRY = re.compile(r"^\.visible \.entry (\w+)\(", re.M)


def check_env(arch: str, folder: Path) -> dict[str, str]:
    """The child's environment: compile for `arch` only, PTX and cubin kept in `folder`/dump, every cache
    inside `folder`."""
    dump = folder / "dump"
    dump.mkdir(parents=True, exist_ok=True)
    return {
        **os.environ,
        "CUTE_DSL_ARCH": feature_arch(arch),
        "CUTE_DSL_KEEP": "ptx,cubin",
        "CUTE_DSL_DUMP_DIR": str(dump),
        "CUTE_DSL_DISABLE_FILE_CACHING": "1",
        "TMPDIR": str(folder),
        _CHILD: "1",
    }


def check_file(candidate: str, arch: str = "sm_90", problem: str = "", preset: str = "") -> CompileCheck:
    """Run the child on a candidate file (and a problem file); a child that dies or hangs fails the check."""
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="kbench-cute-") as tmp:
        cmd = [sys.executable, "-m", "kbench.backends.cutecheck", candidate, problem, preset]
        try:
            proc = subprocess.run(
                cmd, env=check_env(arch, Path(tmp)), capture_output=True, text=True, timeout=_TIMEOUT_S
            )
        except subprocess.TimeoutExpired:
            return CompileCheck(False, f"compile check exceeded {_TIMEOUT_S:.0f} s")
        lines = proc.stdout.strip().splitlines()
        try:
            res = json.loads(lines[-1])
        except (IndexError, json.JSONDecodeError):
            tail = (proc.stdout + proc.stderr)[-4000:]
            return CompileCheck(False, f"compile check exited {proc.returncode} without a result:\n{tail}")
    return CompileCheck(bool(res["ok"]), res["log"][-8000:], tuple(res["kernels"]), time.perf_counter() - t0)


def check_source(source: str, arch: str = "sm_90", problem: str = "", preset: str = "") -> CompileCheck:
    with tempfile.TemporaryDirectory(prefix="kbench-cute-src-") as tmp:
        path = Path(tmp, "candidate.py")
        path.write_text(source)
        return check_file(str(path), arch, problem, preset)


# ---- the child ----


class _NoStream:
    """What `torch.cuda.current_stream()` answers in the child: the legacy default stream's handle."""

    cuda_stream = 0


def _no_launches(calls: list[str]) -> None:
    from cutlass.base_dsl.jit_executor import JitCompiledFunction, JitExecutor

    def skip(self: Any, *args: Any, **kwargs: Any) -> int:
        calls.append(getattr(self, "function_name", "") or "executor")
        return 0

    for cls in (JitCompiledFunction, JitExecutor):
        cls.__call__ = skip  # type: ignore[method-assign]
    JitCompiledFunction.run_compiled_program = skip  # type: ignore[method-assign]  # a direct jit call


def _child(candidate_file: str, problem_file: str, preset: str) -> dict[str, Any]:
    import torch

    calls: list[str] = []
    log: list[str] = []
    ok = True
    torch.cuda.current_stream = lambda *a, **k: _NoStream()  # type: ignore[assignment]
    try:
        _no_launches(calls)
        module = load_module("kbench_candidate", candidate_file)
        if problem_file:
            forward_once(module, problem_file, preset)
    except (Exception, SystemExit):
        ok = False
        log.append(traceback.format_exc(limit=6))
    dump = Path(os.environ["CUTE_DSL_DUMP_DIR"])
    kernels = [k for p in sorted(dump.glob("*.ptx")) for k in _ENTRY.findall(p.read_text())]
    hosts = sorted(p.name.split(".")[0] for p in dump.glob("*.ptx"))
    if ok and not hosts:
        ok = False
        log.append("no @cute.jit function was compiled (at import, or by the forward with a problem file)")
    log += [f"compiled for {os.environ['CUTE_DSL_ARCH']}: {h}" for h in hosts]
    log += [f"launch skipped (no GPU): {c}" for c in dict.fromkeys(calls)]
    return {"ok": ok, "log": "\n".join(log), "kernels": kernels}


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[1].startswith("-"):
        print(
            "usage: python -m kbench.backends.cutecheck CANDIDATE.py [PROBLEM.py [PRESET]]", file=sys.stderr
        )
        print("(the arch: CUTE_DSL_ARCH, e.g. sm_90a)", file=sys.stderr)
        return 2
    if os.environ.get(_CHILD) != "1":  # run by hand: start the child, in a folder of its own
        res = check_file(argv[1], os.environ.get("CUTE_DSL_ARCH", "sm_90"), *argv[2:4])
        print(json.dumps({"ok": res.ok, "log": res.log, "kernels": list(res.kernels)}))
        return 0 if res.ok else 1
    print(json.dumps(_child(argv[1], *(argv[2:4] + ["", ""])[:2])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
