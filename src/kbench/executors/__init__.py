"""Executors as a registry: where evaluation jobs run.

`local` (default): one timed job per GPU at a time over all local GPUs (or one CPU lane), with a pool of
CPU builders compiling candidates ahead of the GPU queue. `ray`: one lane actor per GPU of the cluster
(`num_gpus=1`, `slots` evaluations in flight), builders as CPU tasks, against a local Ray or a cluster
address. Either way the host receives every
verdict through `on_result` and writes it to its store; executors never write records themselves.
"""

from __future__ import annotations

from collections.abc import Callable

from kbench.errors import ConfigError
from kbench.executors.base import BuildFn, EvalFn, Executor, Job, ResultFn

__all__ = ["BuildFn", "EvalFn", "Executor", "Job", "ResultFn", "get_executor", "register_executor"]

_REGISTRY: dict[str, Callable[..., Executor]] = {}


def register_executor(name: str) -> Callable[[Callable[..., Executor]], Callable[..., Executor]]:
    def deco(factory: Callable[..., Executor]) -> Callable[..., Executor]:
        _REGISTRY[name] = factory
        return factory

    return deco


def get_executor(name: str, **options: object) -> Executor:
    if name not in _REGISTRY:
        _load_builtin()
    if name not in _REGISTRY:
        raise ConfigError(f"unknown executor {name!r}; choose one of: {', '.join(sorted(_REGISTRY))}")
    return _REGISTRY[name](**options)


def _load_builtin() -> None:
    from kbench.executors import local, ray_executor  # noqa: F401  (registration side effect)
