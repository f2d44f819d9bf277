"""Builds for a job's runner, made and checked by trusted code (referee side).

A runner whose candidate calls `load_inline` for an extension that is not in the cache asks its referee
(`BuildRequest`, sandbox/commands.py). The referee:

1. checks the arguments are plain data and computes the build's key itself (backends/buildcache.py);
2. prepares the recipes (backends/fastbuild.py): the shim header folders, made here from the installed
   headers and kept beside a manifest of their digests, reused only while they match it; a precompiled
   header folder is used only while it matches its manifest;
3. runs the compile in a process of its own (backends/jitbuild.py), walled in and confined to write only
   a staging folder: the compiler reads the candidate's sources and flags, and flags can run programs;
4. checks what it left -- the module file, a regular file, no links -- writes the manifest of its digest
   and renames the folder into the cache (`ROOT/KEY`); a precompiled header it made goes to its folder
   the same way. A runner loads a build only when the module matches the manifest (buildcache.verified).

So no candidate code, and nothing a candidate's flags can run, writes anything another job reads.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from kbench import entries
from kbench.backends import buildcache, fastbuild, pch
from kbench.backends.jitbuild import compiler_said_no
from kbench.referee.pchmaker import PchMaker
from kbench.sandbox import confine, isolate
from kbench.sandbox.commands import BuildAnswer, BuildRequest

STAGING = ".staging"
_ALLOWED_KEYS = {
    "name", "cpp_sources", "cuda_sources", "sycl_sources", "functions", "extra_cflags", "extra_cuda_cflags",
    "extra_sycl_cflags", "extra_ldflags", "extra_include_paths", "with_cuda", "with_sycl",
    "is_python_module", "with_pytorch_error_handling", "keep_intermediates", "use_pch", "no_implicit_headers",
    "is_standalone",
}  # fmt: skip


# A candidate's compiler and linker flags reach a shell unquoted (torch writes them into ninja's command
# lines): one flag `;` then a command ran in the builder, which may write the precompiled headers other
# builds share. A flag is one word of these characters, and none may name a file the compiler or linker
# would read or write besides its own (an output, a dependency file, an included header, a response file,
# a plugin, dumps, profiles, a link map); only the flags of _PATH_FLAGS may name a folder.
_FLAG = re.compile(r"[A-Za-z0-9_+=.,:/%@-]+")
_FLAG_LISTS = (
    "extra_cflags",
    "extra_cuda_cflags",
    "extra_sycl_cflags",
    "extra_ldflags",
    "extra_include_paths",
)
_FILE_FLAGS = re.compile(
    r"^-(o|MF|MT|MQ|include|imacros|save-temps|fdump|specs|wrapper|x\b|B|fplugin|fprofile|aux-info|fstack-usage"
    r"|fcallgraph-info|fsave-optimization-record|fopt-info|dump|gsplit-dwarf)|^@|^--(output|include|save-temps|dump)"
    r"|^\.\.?$"
    r"|^-Wl,.*(-Map|--Map|-T\b|--script|-o\b|--output|@|--dependency-file)"
)
_PATH_FLAGS = ("-I", "-L", "-isystem", "-Wl,-rpath,", "-Wl,-rpath=")  # the flags that may name a folder


def _flags(arguments: dict[str, Any]) -> None:
    for key in _FLAG_LISTS:
        value = arguments.get(key) or []
        for flag in [value] if isinstance(value, str) else value:
            if not isinstance(flag, str) or not _FLAG.fullmatch(flag):
                raise ValueError(
                    f"load_inline's {key}: {flag!r} is not one plain flag (no spaces or shell characters)"
                )
            if key != "extra_include_paths" and (
                _FILE_FLAGS.match(flag) or ("/" in flag and not flag.startswith(_PATH_FLAGS))
            ):
                raise ValueError(
                    f"load_inline's {key}: {flag!r} names a file for the compiler, which a build may not"
                )


def _checked(arguments: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(arguments) - _ALLOWED_KEYS)
    if unknown:
        raise ValueError(f"unsupported load_inline arguments: {', '.join(unknown)}")
    _flags(arguments)
    if not isinstance(arguments.get("name"), str) or not arguments["name"].isidentifier():
        raise ValueError("load_inline's name must be a Python identifier")
    return buildcache.as_data(arguments)


def recipes(
    arguments: dict[str, Any], pch_folder: Path | None, root: Path, lite_pch: Path | None = None
) -> list[tuple[str, dict[str, Any]]]:
    """Build attempts in order: per-operator headers, the light headers, then load_inline's own arguments
    (each fast recipe only where it applies; a precompiled bindings header with either when one exists,
    else first the same with lean bindings where the C++ sources only declare). Where the C++ sources
    define functions, the first attempt compiles the bindings file against the lite header, precompiled
    in `lite_pch` when that is ready."""
    attempts: list[tuple[str, dict[str, Any]]] = []
    if fastbuild.fast_recipe():
        fast, labels = arguments, []
        light = fastbuild.light_cuda_sources(fast)
        if light is not None:
            fast, labels = light, ["light-headers"]
        plain, plain_labels = fast, list(labels)  # before any precompiled torch/extension.h
        precompiled = (
            pch.with_pch(fast, pch_folder) if pch_folder is not None and pch.ready(pch_folder) else None
        )
        if precompiled is not None:
            fast, labels = precompiled, [*labels, "pch"]
        shim = fastbuild.op_header_shim(root, fast) if fastbuild.op_headers() else None
        if shim is not None:
            attempts.append(("+".join(["op-headers", *labels]), fastbuild.with_include_first(fast, shim)))
            plain, plain_labels = fastbuild.with_include_first(plain, shim), ["op-headers", *plain_labels]
        if labels:
            attempts.append(("+".join(labels), fast))
        bindings = fastbuild.bindings_shim(root, arguments) if precompiled is None else None
        if bindings is not None:
            label, first = attempts[0] if attempts else ("", arguments)
            lean = fastbuild.with_include_first(first, bindings)
            attempts.insert(0, ("+".join([*filter(None, [label]), "lean-bindings"]), lean))
        lite = fastbuild.lite_header_shim(root, arguments)
        if lite is not None:
            header = lite / "torch" / "extension.h"
            made = lite_pch is not None and pch.ready(lite_pch, header)
            folder, tag = (lite_pch, ["lite-header", "pch"]) if made and lite_pch else (lite, ["lite-header"])
            attempts.insert(0, ("+".join([*plain_labels, *tag]), fastbuild.with_include_first(plain, folder)))
    attempts.append(("standard" if not attempts else "standard (fast recipe failed)", arguments))
    return attempts


def _module_file(folder: Path, name: str) -> Path | None:
    """The built module, when it is a regular file and nothing in the folder is a link."""
    import importlib.machinery

    for entry in folder.rglob("*"):
        if entry.is_symlink():
            return None
    for suffix in importlib.machinery.EXTENSION_SUFFIXES[-1:] + [".so"]:
        path = folder / f"{name}{suffix}"
        if path.is_file() and not path.is_symlink():
            return path
    return None


Compile = Callable[[dict[str, Any]], dict[str, Any]]  # a request -> what jitbuild.run returns


def build(arguments: dict[str, Any], key: str, root: Path, compile_: Compile) -> BuildAnswer:
    """Build `arguments` (checked plain data) under `key` into the cache at `root`: the recipes and shims
    made here, the compile by `compile_` (a confined process: `Builder._spawn`; tests pass one that runs
    in this process), what it left checked, sealed and moved into place."""
    mode = pch.pch_mode()
    toolchain = buildcache.toolchain(fastbuild.with_cuda(arguments))
    fast = mode != "off" and fastbuild.fast_recipe()
    pch_folder = pch.pch_dir(root, arguments, toolchain) if fast else None
    lite = fastbuild.lite_header_shim(root, arguments) if fast else None
    header = lite / "torch" / "extension.h" if lite is not None else None  # the header a maker compiles
    lite_pch = pch.pch_dir(root, arguments, toolchain, header) if header is not None else None
    attempts = recipes(arguments, pch_folder, root, lite_pch)
    staging = root / STAGING / f"{key}-{os.getpid()}-{secrets.token_hex(4)}"
    staging.mkdir(parents=True)
    target = lite_pch or pch_folder
    maker = None
    if mode == "make" and target is not None and not pch.ready(target, header):
        maker = PchMaker(root / STAGING / f"{key}-pch-{os.getpid()}-{secrets.token_hex(4)}", attempts[0][1],
                         header, compile_)  # fmt: skip
    try:
        request = {"attempts": attempts, "staging": str(staging)}
        done = compile_(request)
        if maker is not None and target is not None:  # a header made beside a build that failed is good too
            done["pch_seconds"] = maker.adopt(target)
        errors = dict(done.get("errors") or {})
        if not done.get("ok"):
            log = (list(errors.values()) or [done.get("error", "the build failed")])[-1]
            if not done.get("error") and errors and all(compiler_said_no(e) for e in errors.values()):
                try:
                    remember_failure(root, key, log, errors)
                except OSError:  # a record that cannot be written is only not kept
                    pass
            return BuildAnswer(ok=False, log=log, errors=errors)
        built = Path(done["folder"])
        module = _module_file(built, arguments["name"])
        if module is None or built.parent != staging:
            return BuildAnswer(ok=False, log="the build left no module file, or left links", errors=errors)
        buildcache.seal(built, [module.name])
        buildcache.place(built, root / key)
        return BuildAnswer(
            ok=True, folder=str(root / key), name=arguments["name"], recipe=done.get("label", ""),
            errors=errors, pch_seconds=done.get("pch_seconds"),
        )  # fmt: skip
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        if maker is not None:
            maker.cleanup()


FAILED = ".failed"  # ROOT/.failed/KEY: what the compiler said of a build that can only fail again


def remember_failure(root: Path, key: str, log: str, errors: dict[str, str]) -> None:
    """Keep what the compiler said under the build's key, sealed like a build: a later request for the
    same key (a resubmitted sample, another protocol's run, a resumed run) gets the same build error
    without compiling again."""
    staging = root / STAGING / f"{key}-{os.getpid()}-{secrets.token_hex(4)}"
    staging.mkdir(parents=True)
    (staging / "failure.json").write_text(json.dumps({"log": log, "errors": errors}))
    buildcache.seal(staging, ["failure.json"])
    (root / FAILED).mkdir(exist_ok=True)
    buildcache.place(staging, root / FAILED / key)


def known_failure(root: Path, key: str) -> dict[str, Any] | None:
    """What the compiler said of this build before (`remember_failure`), while its record matches its
    manifest; None otherwise."""
    folder = root / FAILED / key
    if buildcache.verified(folder) is None:
        return None
    try:
        data = json.loads((folder / "failure.json").read_text())
    except (OSError, ValueError):
        return None
    ok = isinstance(data.get("log"), str) and isinstance(data.get("errors"), dict)
    return data if ok else None


class Builder:
    """The referee's builds for one job: `__call__` answers a runner's `BuildRequest`."""

    def __init__(
        self,
        cache_dir: Path,
        budget_s: float,
        env: dict[str, str],
        confined: bool,
        nice: int = 0,
        hand_to: Path | None = None,
    ) -> None:
        self.root = cache_dir / "builds"
        # Where the job's runner gets its copy of each build (a folder it may read, not write); None:
        # the cache's own folder (a caller that loads in its own, trusted process).
        self.hand_to = hand_to
        self.nice = nice  # a build ahead of the GPU queue runs below the lanes (jitbuild.BUILD_NICE)
        self.budget_s = budget_s
        self.env = env
        self.confined = confined
        self.pids: set[int] = set()  # builders running now (not a candidate's leftovers)
        self.timed_out = False  # a build ran past its budget: the job's verdict is `timeout build`

    def __call__(self, request: BuildRequest) -> BuildAnswer:
        t0 = time.perf_counter()
        try:
            arguments = _checked(request.arguments)
        except ValueError as exc:
            return BuildAnswer(ok=False, log=str(exc))
        key = buildcache.build_key(arguments)
        target = self.root / key
        if buildcache.verified(target) is not None:
            answer = BuildAnswer(
                ok=True, folder=str(target), name=arguments["name"], recipe="cache", cache_hit=True
            )
        elif (failed := known_failure(self.root, key)) is not None:
            answer = BuildAnswer(
                ok=False, log=failed["log"], errors=failed["errors"], recipe="cache", cache_hit=True
            )
        else:
            answer = build(arguments, key, self.root, self._spawn)
        if answer.ok and self.hand_to is not None:
            answer = self._hand_over(answer, key)
        answer.seconds = round(time.perf_counter() - t0, 3)
        return answer

    def _hand_over(self, answer: BuildAnswer, key: str) -> BuildAnswer:
        """Copy a verified build to the job's own folder: its runner reads that copy and never the shared
        cache (no other candidate's binary, no cache layout to learn). Copied files are checked again."""
        assert self.hand_to is not None
        source, copy = Path(answer.folder), self.hand_to / key
        if buildcache.verified(copy) is None:
            shutil.rmtree(copy, ignore_errors=True)
            manifest = buildcache.verified(source)
            if manifest is None:
                return BuildAnswer(ok=False, log=f"the cached build {key} changed while it was handed over")
            for rel in [*manifest["files"], buildcache.MANIFEST]:
                (copy / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source / rel, copy / rel)
            if buildcache.verified(copy) is None:
                shutil.rmtree(copy, ignore_errors=True)
                return BuildAnswer(ok=False, log=f"the copy of build {key} does not match its manifest")
        return answer.model_copy(update={"folder": str(copy)})

    def _spawn(self, request: dict[str, Any]) -> dict[str, Any]:
        """The compile in a process of its own, walled in and confined to its staging folder."""
        staging = Path(request["staging"])
        tmp = staging / "tmp"
        tmp.mkdir()
        request = request | {
            "writes": [str(staging)],
            "reads": [str(p) for p in confine.standard_reads([self.root])] if self.confined else None,
            "walls": asdict(isolate.Walls(mount=False, net=True)) if self.confined else None,
            "nice": self.nice,
        }
        (staging / "request.json").write_text(json.dumps(request))
        env = isolate.scrubbed_env(self.env, {"TMPDIR": str(tmp), "HOME": str(tmp)})
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        with (staging / "build.log").open("wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", entries.BUILDER, str(staging / "request.json")],
                cwd=staging, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip
            self.pids.add(proc.pid)
            try:
                proc.wait(timeout=self.budget_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                # a precompiled header's maker that ran long costs the builds only the header
                self.timed_out = self.timed_out or not request.get("pch_probe")
                return {"ok": False, "error": f"the build ran past its budget of {self.budget_s:.0f} s"}
            finally:
                self.pids.discard(proc.pid)
        try:
            return json.loads((staging / jitbuild_result()).read_text())
        except (OSError, ValueError):
            tail = (staging / "build.log").read_text(errors="replace")[-4000:]
            return {
                "ok": False,
                "error": f"the build process ended without a result (code {proc.returncode}):\n{tail}",
            }


def trusted_request(cache_dir: Path, budget_s: float = 600.0) -> Callable[[dict[str, Any]], BuildAnswer]:
    """`buildcache.install`'s request for trusted code that loads extensions in its own process (tests,
    benchmarks, tools): the same builder a job's referee runs, into `cache_dir`'s builds, with this
    process's environment."""

    def request(arguments: dict[str, Any]) -> BuildAnswer:
        builder = Builder(cache_dir, budget_s, dict(os.environ), confined=False)
        return builder(BuildRequest(arguments=arguments))

    return request


def jitbuild_result() -> str:
    from kbench.backends.jitbuild import RESULT

    return RESULT
