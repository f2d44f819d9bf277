"""Candidate backends as plugins: everything kbench knows about one backend lives in its class.

backend = get_backend("cuda")
backend.check_environment("cuda:0")          # host: ConfigError with the fix when tools are missing
backend.job_env("cpu")                       # host: environment for the candidate worker
backend.install_hooks(recorder, cache_dir, request)  # runner: before the candidate is imported
backend.find_kernels(ctx)                     # static checks: the kernels its source defines (checks/)
backend.compile_check(source, "sm_90")        # anywhere: compile without running

A backend is one module that subclasses `Backend` and registers it (`@register_backend("name")`); its
prompt text lives in its `prompt_package` (kbench's own: prompts/templates/backends/NAME.md and
prompts/examples/NAME/) and its shipped solutions under suite/solutions/NAME/. The built-in backends are
this package's modules that register one (BUILTIN); another package adds one through the
`kbench.backends` entry point group (`name = "package.module"`). Nothing outside a backend's module
decides by its name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from kbench.errors import ConfigError


@dataclass
class KernelRecorder:
    """Worker-side record of what the candidate built and called (cpp functions, interpreted Triton)."""

    calls: dict[str, int] = field(default_factory=dict)
    exported: set[str] = field(default_factory=set)  # functions of extensions the candidate loaded
    defined: set[str] = field(default_factory=set)  # kernel names read from the sources it compiled
    build_seconds: float = 0.0
    cache_hit: bool = True
    build_failed: bool = False
    build_log: str = ""
    extra: dict[str, Any] = field(default_factory=dict)  # backend-specific records (Triton launches)
    # the ablation call (rule no-custom-kernel): what each kernel of the candidate's produced is made NaN
    ablate: bool = False

    def hit(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1

    def call(self, name: str, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Call one of the candidate's kernels, counted once it returns (a call that raises did no work);
        in an ablation call, its results -- the tensors it returned, and those of its arguments it wrote --
        are then filled with NaN, so an output that does not change did not need it."""
        before = _snapshot(args, kwargs) if self.ablate else None
        out = fn(*args, **kwargs)
        self.hit(name)
        if before is not None:
            _spoil(out, before)
        return out


def _tensors(value: Any) -> list[Any]:
    import torch

    if isinstance(value, torch.Tensor):
        return [value] if value.is_floating_point() else []
    if isinstance(value, tuple | list):
        return [t for v in value for t in _tensors(v)]
    return []


def _snapshot(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[tuple[Any, Any]]:
    return [(t, t.detach().clone()) for t in _tensors([*args, *kwargs.values()])]


def _spoil(out: Any, before: list[tuple[Any, Any]]) -> None:
    import torch

    with torch.no_grad():
        for t in _tensors(out):
            t.fill_(float("nan"))
        for t, old in before:
            if not torch.equal(t, old):  # written by the kernel: its output
                t.fill_(float("nan"))


@dataclass(frozen=True)
class CompileCheck:
    ok: bool
    log: str = ""
    kernels: tuple[str, ...] = ()
    seconds: float = 0.0


class Backend:
    """Base class: a load_inline extension built on the CPU is the default (no device tools needed)."""

    name = ""
    title = ""  # its name as people write it ("CUDA"), in prompts and messages
    prompt_title = ""  # in prompts, when it says more than `title` ("C++ (CPU)")
    prebuilds = True  # builds a load_inline extension that a CPU builder can compile ahead of the run
    gpu_kernels = False  # its kernels are GPU kernels: its shipped solutions run where there is a GPU
    needs_gpu = False  # cannot run at all without a GPU (Triton has its CPU interpreter)
    default_on = ""  # "gpu" / "cpu": the backend a run on such a machine gets when it names none
    cpu_run = ""  # how its GPU kernels run on a CPU, where they do ("in Triton's interpreter")
    cpu_compile = ""  # what a machine without a GPU can still check of a GPU-only backend's kernels
    triton_kernels = False  # Triton compiles its kernels: its workers use Triton's cache (its key looked
    # up by the host first), and its compile check, on a CPU host too
    code_names: tuple[str, ...] = ()  # dotted names its kernel code calls (`tl.sum` is a kernel's, not
    # PyTorch's, in a rule that looks for PyTorch doing the work)
    runner_imports: tuple[str, ...] = ()  # imported by its runner before the guards' snapshot of torch
    missing_kernel = "no kernel found"  # rule no-kernel: what its source lacks
    detect_rank = 100  # which backend's kernels a source is taken for first (rule no-kernel's hint)
    package = ""  # the distribution that builds its kernels ("triton"), whose version `version()` gives
    prompt_package = "kbench.prompts"  # holds its prompt text: templates/backends/NAME.md, examples/NAME/

    def find_kernels(self, ctx: Any) -> list[str]:
        """The names of the kernels `ctx` (a parsed candidate: checks/context.py's CheckContext, whose
        views a finder reads; the checks call this, a backend never imports them) defines for this
        backend, read from its text, in order of appearance."""
        return []

    def kernel_symbols(self, names: list[str]) -> list[str]:
        """The names the kernels `names` (`find_kernels`') run under on the device, as its profiler lists
        them (a DSL that generates its kernels may name them otherwise)."""
        return names

    def low_precision(self, ctx: Any) -> list[tuple[int, str]]:
        """Where `ctx` (a parsed candidate, as in `find_kernels`) computes in a precision below fp32 in
        this backend's own spelling that the shared rule (checks/rules_kernel.py precision-downgrade:
        PyTorch's and Triton's dtypes, TF32 keywords, C/CUDA types) cannot know: (line, what it uses)."""
        return []

    def version(self) -> str | None:
        """The version of the tool that builds its kernels, None where it is not installed: by default its
        `package`'s (a distribution's name)."""
        if not self.package:
            return None
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version(self.package)
        except PackageNotFoundError:
            return None

    def check_environment(self, device: str) -> None:
        """Raise ConfigError (with the fix) when this machine cannot run candidates of this backend."""

    def job_env(self, device: str) -> dict[str, str]:
        return {}

    def install_hooks(self, recorder: KernelRecorder, cache_dir: Path, request: Any = None) -> None:
        """Runner side, before the candidate is imported; `cache_dir`: kbench's cache folder (builds are
        kept in its `builds` folder); `request`: asks the referee for a build the cache lacks
        (backends/buildcache.py), None where nothing may build."""
        from kbench.backends.buildcache import install

        install(recorder, cache_dir / "builds", request)

    def compile_check(self, source: str, arch: str = "sm_90") -> CompileCheck:
        raise ConfigError(f"backend {self.name!r} has no compile check")


B = TypeVar("B", bound=type[Backend])
_REGISTRY: dict[str, Backend] = {}


def register_backend(name: str) -> Callable[[B], B]:
    def deco(cls: B) -> B:
        instance = cls()
        instance.name = name
        _REGISTRY[name] = instance
        return cls

    return deco


def backend_names() -> list[str]:
    _load(plugins=True)
    return sorted(_REGISTRY)


def backends() -> list[Backend]:
    """Every registered backend, in the order a source's kernels are matched against them."""
    _load(plugins=True)
    return sorted(_REGISTRY.values(), key=lambda b: (b.detect_rank, b.name))


def gpu_backends(gpu: bool) -> list[str]:
    """The backends whose kernels run on a GPU (`gpu`), or on the CPU (not `gpu`), by name."""
    return [b.name for b in sorted(backends(), key=lambda b: b.name) if b.gpu_kernels == gpu]


def kernel_code_names() -> tuple[str, ...]:
    """The dotted names every backend's kernel code is written with (`Backend.code_names`)."""
    return tuple(dict.fromkeys(n for b in backends() for n in b.code_names))


def default_backend(gpu: bool) -> str:
    """The backend a run gets when it names none: the one that says it is the default on a GPU (`gpu`)
    or on the CPU, a built-in one first (so every command's settings need no plugin scan)."""
    where = "gpu" if gpu else "cpu"
    for plugins in (False, True):
        _load(plugins)
        for name, b in sorted(_REGISTRY.items()):
            if b.default_on == where:
                return name
    raise ConfigError(f"no backend is registered as the default on the {where.upper()}")


def get_backend(name: str) -> Backend:
    _load(plugins=False)
    if name not in _REGISTRY:
        _load(plugins=True)  # the plugins' entry points are read only for a name the built-ins lack
    if name not in _REGISTRY:
        raise ConfigError(f"unknown backend {name!r}; choose one of: {', '.join(sorted(_REGISTRY))}")
    return _REGISTRY[name]


def check_backend_name(name: str) -> str:
    """`name` when it is a registered backend's; ValueError (for a validator) otherwise."""
    try:
        get_backend(name)
    except ConfigError as exc:
        raise ValueError(str(exc)) from None
    return name


def startup_env(backend: str, device: str) -> dict[str, str]:
    """What the backend's worker environment for these settings holds of STARTUP_VARS (a starter takes
    those when it starts, e.g. Triton's interpreter on a machine without a GPU): the device is the one
    `device` evaluates on (`auto`: a GPU where the driver's device node exists). {} for a backend nobody
    registered or named (the default backends need nothing there; the evaluation's own check names an
    unknown one)."""
    if not backend:
        return {}
    import os

    from kbench.sandbox.starter import STARTUP_VARS

    no_gpu = device == "cpu" or (device == "auto" and not os.path.exists("/dev/nvidiactl"))
    try:
        env = get_backend(backend).job_env("cpu" if no_gpu else "cuda")
    except ConfigError:
        return {}
    return {k: v for k, v in env.items() if k in STARTUP_VARS}


BUILTIN = ("cpp", "cuda", "triton")  # this package's modules that each register a backend
ENTRY_POINTS = "kbench.backends"  # the entry point group through which other packages add one
# this package's own plugins (their entry points in pyproject.toml): imported by name where no installed
# metadata lists them, as when kbench runs from a source tree on PYTHONPATH, which lost them silently
SHIPPED_PLUGINS = ("helion", "tilelang", "cute")
_loaded: set[str] = set()


def _load(plugins: bool) -> None:
    """Import the built-in backends' modules, and with `plugins` the entry points' (reading them costs
    a process ~60 ms, so a worker that names a built-in backend never does)."""
    import importlib

    if "builtin" not in _loaded:
        _loaded.add("builtin")
        for module in BUILTIN:
            importlib.import_module(f"{__name__}.{module}")
    if plugins and "plugins" not in _loaded:
        _loaded.add("plugins")
        from functools import partial
        from importlib.metadata import entry_points

        points: list[tuple[str, str, Callable[[], object]]] = [
            (p.name, p.value, p.load) for p in entry_points(group=ENTRY_POINTS)
        ]
        named = {name for name, _, _ in points}
        for module in (m for m in SHIPPED_PLUGINS if m not in named):  # no installed metadata names it
            path = f"{__name__}.{module}"
            points.append((module, path, partial(importlib.import_module, path)))
        for name, value, load in points:
            try:
                load()
            except Exception as exc:  # a broken plugin must not take the built-in backends down
                import warnings

                warnings.warn(f"backend plugin {name!r} ({value}) failed to load: {exc}", stacklevel=2)
