"""Candidate backends as a registry: how each one builds/loads, names its kernels and compile-checks.

backend = get_backend("cuda")
backend.check_environment("cuda:0")          # host: ConfigError with the fix when tools are missing
backend.worker_env("cpu")                     # host: environment for the candidate worker
backend.install_hooks(recorder, cache_dir, request)  # runner: before the candidate is imported
backend.compile_check(source, "sm_90")        # anywhere: compile without running
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
    """Base class: the cpp backend's behaviour is the default (load_inline, no device tools needed)."""

    name = ""
    prebuilds = True  # builds a load_inline extension that a CPU builder can compile ahead of the run
    gpu_kernels = False  # its kernels are GPU kernels: its shipped solutions run where there is a GPU
    needs_gpu = False  # cannot run at all without a GPU (Triton has its CPU interpreter)

    def check_environment(self, device: str) -> None:
        """Raise ConfigError (with the fix) when this machine cannot run candidates of this backend."""

    def worker_env(self, device: str) -> dict[str, str]:
        return {}

    def install_hooks(self, recorder: KernelRecorder, cache_dir: Path, request: Any = None) -> None:
        """Runner side, before the candidate is imported; `cache_dir`: kbench's cache folder (builds are
        kept in its `builds` folder); `request`: asks the referee for a build the cache lacks
        (backends/buildcache.py), None where nothing may build."""
        from kbench.backends.buildcache import install

        install(recorder, cache_dir / "builds", request)

    def kernel_names(self, source: str) -> tuple[str, ...]:
        from kbench.checks.kernels import kernel_names

        return kernel_names(source, self.name)

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
    _load_builtin()
    return sorted(_REGISTRY)


def gpu_backends(gpu: bool) -> list[str]:
    """The backends whose kernels run on a GPU (`gpu`), or on the CPU (not `gpu`), by name."""
    _load_builtin()
    return sorted(name for name, b in _REGISTRY.items() if b.gpu_kernels == gpu)


def get_backend(name: str) -> Backend:
    _load_builtin()
    if name not in _REGISTRY:
        raise ConfigError(f"unknown backend {name!r}; choose one of: {', '.join(sorted(_REGISTRY))}")
    return _REGISTRY[name]


def _load_builtin() -> None:
    from kbench.backends import cpp, cuda, triton  # noqa: F401  (registration side effects)
