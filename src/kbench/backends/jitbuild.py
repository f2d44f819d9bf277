"""One extension build, in a process of its own: `python -m kbench.backends.jitbuild REQUEST` (trusted code,
walled in as a runner is).

The referee (referee/builds.py) starts this for a candidate's `load_inline` call. It runs kbench's code
only, but the compiler it runs reads the candidate's sources and flags, and flags can run programs
(`-wrapper`, `-fplugin`): so it first enters namespaces of its own (sandbox/isolate.py: no network, no
capability outside them) and confines itself (sandbox/confine.py) to write only its staging folder and
its temporary folder. It never imports what it built. It tries the request's recipes in order
(backends/fastbuild.py: the cheaper header recipes first, each into a folder of its own). The referee
checks what it left there and moves it into the cache.

A precompiled header that later builds share is made by a process of this kind of its own, never by one
that compiles a candidate's sources: its request has no attempts, only `pch` (the folder to make it in)
and `pch_probe` (load_inline's arguments of the first attempt with a source that defines nothing), whose
ninja file it writes without building to read the compile flags, then precompiles the installed header
(or the shim `pch_header`) with them (backends/pch.py).

The request (JSON): {"attempts": [[label, arguments], ...], "staging": folder, "pch": folder or null,
"pch_probe": arguments or null, "pch_header": path or null, "writes": [...], "reads": [...] or null,
"walls": {...} or null, "nice": increment} (a diagnostic from an attempt labelled as in CONCLUSIVE ends
the attempts). The result: `staging/result.json` {"ok", "label", "folder", "errors": {label: error},
"pch_seconds"}.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

from kbench.backends.fastbuild import as_list

RESULT = "result.json"
BUILD_NICE = 10  # a build ahead of the GPU queue yields the cores to the lanes' runners, which hold the GPU
# Attempts whose failure the later ones would repeat: "pch" is load_inline's own arguments with torch's
# header precompiled for the same flags (GCC uses a .gch only where it stands for the header exactly), so
# what the compiler said to it, the standard attempt after it would hear again (~15 s of parsing).
CONCLUSIVE = ("pch",)
# ...unless the compiler's complaint is about the precompiled header itself (one GCC cannot map or finds
# invalid where the header text is not there to fall back on): the standard attempt does without it.
_PCH_TROUBLE = re.compile(r"\.gch\b|PCH file|precompiled header")

_TRANSIENT = re.compile(
    r"Killed|internal compiler error|No space left|Cannot allocate memory|virtual memory exhausted|"
    r"out of memory|Bus error|Segmentation fault|terminated|Interrupt|Resource temporarily unavailable|"
    r"Too many open files|Input/output error|Permission denied|Read-only file system"
)
_DIAGNOSTIC = re.compile(r": (fatal )?error: ")
# A lite-header attempt (the bindings file against fastbuild.py's lite torch/extension.h) fails the same
# way under torch's own header when its errors in main.cpp's own text are ones no declaration can cause:
# the parser met a keyword or a punctuator where it expected another, or a literal never ended (what the
# generated module's use of a function that did not parse then brings in torch's headers follows from
# them). The forms an unknown macro takes (a call at namespace scope: "expected
# constructor, destructor, or type conversion"; a word between a type and a name: "expected initializer";
# a word after an expression: "expected ';' before 'WORD'") and every error there naming a name, a type, a
# member, an overload, a template or an #error might come from what the lite header leaves out: then the
# next attempts run. So do sources with a preprocessor conditional: a macro only torch's own header defines
# (`#ifndef TORCH_MODULE`) can choose text that fails to parse under the lite header alone.
_CONDITIONAL = re.compile(r"^[ \t]*#[ \t]*(if|ifdef|ifndef|elif|elifdef|elifndef)\b", re.M)
_SYNTAX = re.compile(
    r"expected (?!constructor|initializer|type-specifier|class-name|template-name|nested-name-specifier"
    r"|unqualified-id)|stray |missing terminating |unterminated "
)
_ERROR = re.compile(r"^(\S+?):\d+:\d+: (?:fatal )?error: (.*)$", re.M)
_BEFORE_WORD = re.compile(r"before [\u2018'](\w+)[\u2019']")
_KEYWORDS = frozenset(
    "alignas alignof auto bool break case catch char class const constexpr const_cast continue decltype "
    "default delete do double dynamic_cast else enum explicit extern false float for friend goto if inline "
    "int long mutable namespace new noexcept nullptr operator private protected public register "
    "reinterpret_cast return short signed sizeof static static_assert static_cast struct switch template "
    "this thread_local throw true try typedef typeid typename union unsigned using virtual void volatile "
    "while".split()
)


def compiler_said_no(error: str) -> bool:
    """Whether a failed attempt's output is the compiler's verdict on the sources (a diagnostic), with no
    sign of the machine's part (a killed or crashed compiler, a full disk, missing memory or rights):
    the same arguments with the same toolchain (both in the build's key) fail the same way again."""
    return bool(_DIAGNOSTIC.search(error)) and not _TRANSIENT.search(error)


def syntax_errors_only(error: str) -> bool:
    """Whether the compiler's first error is in the bindings file's own text (main.cpp: the candidate's C++
    sources and the generated module) and every error there is a syntax error no declaration could cause
    (what the module's use of a function that did not parse then brings in torch's headers follows)."""
    found = _ERROR.findall(error)
    if not found or Path(found[0][0]).name != "main.cpp":
        return False
    return all(_syntax(message) for file, message in found if Path(file).name == "main.cpp")


def _syntax(message: str) -> bool:
    word = _BEFORE_WORD.search(message)
    return bool(_SYNTAX.match(message)) and (word is None or word.group(1) in _KEYWORDS)


def _conclusive(label: str, said: str, arguments: dict[str, Any]) -> bool:
    """Whether the later attempts would hear what the compiler said to this one (see CONCLUSIVE)."""
    if not compiler_said_no(said) or _PCH_TROUBLE.search(said):
        return False
    if label in CONCLUSIVE:
        return True
    sources = "\n".join(as_list(arguments.get("cpp_sources")))
    return "lite-header" in label.split("+") and not _CONDITIONAL.search(sources) and syntax_errors_only(said)


def _wall_in(request: dict[str, Any]) -> str:
    from kbench.sandbox import confine, isolate

    parts = []
    if request.get("walls") is not None:
        walls = isolate.Walls(**request["walls"])
        try:
            parts.append("namespaces " + "+".join(isolate.enter(walls)))
        except (isolate.Refused, OSError) as exc:
            parts.append(f"no namespaces: {exc}")
        isolate.limit_self(walls)
    reads = request.get("reads")
    writes = [Path(p) for p in request.get("writes", [])]
    parts.insert(0, confine.confine(writes, reads=None if reads is None else [Path(p) for p in reads]))
    return ", ".join(parts)


def load_inline(**arguments: Any) -> Any:
    """torch's load_inline, building and never loading what it built."""
    import torch.utils.cpp_extension as ext

    loader = ext._import_module_from_library
    ext._import_module_from_library = lambda name, path, is_python_module: path
    # A fresh name each attempt: torch bumps a name it built before in this process to NAME_v1
    ext.JIT_EXTENSION_VERSIONER.entries.clear()
    try:
        return ext.load_inline(**arguments)
    finally:
        ext._import_module_from_library = loader


class _NinjaWritten(Exception):
    """load_inline wrote its ninja file: the probe of a precompiled header's maker stops there."""


def _stop_at_ninja(*args: Any, **kwargs: Any) -> None:
    raise _NinjaWritten


def make_pch(request: dict[str, Any], load: Any = load_inline) -> dict[str, Any]:
    """The maker's run: the probe's ninja file (`load` with ninja's build replaced by a stop), then the
    header precompiled with its flags into `request["pch"]`."""
    from torch.utils import cpp_extension

    from kbench.backends.pch import make_pch as precompile

    probe = Path(request["staging"], "probe")
    probe.mkdir(parents=True, exist_ok=True)
    run_ninja = cpp_extension._run_ninja_build
    cpp_extension._run_ninja_build = _stop_at_ninja  # type: ignore[assignment]
    try:
        load(**dict(request["pch_probe"], build_directory=str(probe)))
    except _NinjaWritten:
        pass
    except Exception as exc:  # the flags load_inline refused: no header for them, the builds go without
        return {
            "ok": False,
            "label": "",
            "folder": "",
            "errors": {"pch": str(exc)[-8000:]},
            "pch_seconds": None,
        }
    finally:
        cpp_extension._run_ninja_build = run_ninja
    header = request.get("pch_header")  # a shim's header; None: torch's own
    spent = precompile(Path(request["pch"]), probe, Path(header) if header else None)
    return {"ok": spent is not None, "label": "pch", "folder": "", "errors": {}, "pch_seconds": spent}


def run(request: dict[str, Any], load: Any = load_inline) -> dict[str, Any]:
    """Build the request's attempts in turn with `load` (torch's load_inline by default), or, for a
    maker's request, make its precompiled header; what happened."""
    if request.get("pch_probe"):
        return make_pch(request, load)
    staging = Path(request["staging"])
    errors: dict[str, str] = {}
    done: dict[str, Any] = {"ok": False, "label": "", "folder": "", "errors": errors, "pch_seconds": None}
    for i, (label, arguments) in enumerate(request["attempts"]):
        folder = staging / f"attempt-{i}"
        try:
            folder.mkdir(parents=True, exist_ok=True)
            load(**dict(arguments, build_directory=str(folder)))
        except Exception as exc:  # the compiler's error: the candidate's failure, reported as data
            said = str(exc)
            errors[label] = said[-8000:]
            # the whole output: its first error may be cut from the kept tail
            if _conclusive(label, said, arguments):
                break
            continue
        done.update(ok=True, label=label, folder=str(folder))
        break
    return done


def main(argv: list[str]) -> int:
    request = json.loads(Path(argv[1]).read_text())
    if request.get("nice"):
        os.nice(int(request["nice"]))  # its compilers inherit it
    walled = _wall_in(request)
    os.environ.setdefault("MAX_JOBS", str(max(1, len(os.sched_getaffinity(0)))))
    done = run(request)
    done["confinement"] = walled
    Path(request["staging"], RESULT).write_text(json.dumps(done))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
