"""Executors as a registry: where evaluation jobs run.

`local` (default): one timed job per GPU at a time over all local GPUs (or `cpu_lanes` CPU lanes), with a
pool of CPU builders compiling candidates ahead of the GPU queue. `ray`: one lane actor per GPU of the cluster
(`num_gpus=1`, `slots` evaluations in flight), builders as CPU tasks, against a local Ray or a cluster
address. Either way the host receives every
verdict through `on_result` and writes it to its store; executors never write records themselves.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kbench.errors import ConfigError
from kbench.executors.base import BuildFn, EvalFn, Executor, Job, PrefetchFn, ResultFn, lane_device

if TYPE_CHECKING:
    from kbench.config import RunConfig

__all__ = [
    "BuildFn",
    "EvalFn",
    "Executor",
    "Job",
    "PrefetchFn",
    "ResultFn",
    "executor_options",
    "get_executor",
    "is_streaming",
    "lane_device",
    "takes_open_feed",
    "register_executor",
]


@dataclass(frozen=True)
class _Kind:
    factory: Callable[..., Executor]
    options: Callable[[RunConfig], dict[str, object]]  # the factory's options from a run config
    streaming: bool  # run() takes jobs from an iterator as they come, on the host's threads
    devices: bool  # takes the list of GPU devices it may use (`devices=`)
    open_feed: bool = False  # run() takes portable jobs from an iterator that stays open (Ray)


_REGISTRY: dict[str, _Kind] = {}


def register_executor(
    name: str,
    options: Callable[[RunConfig], dict[str, object]] = lambda cfg: {},
    streaming: bool = False,
    devices: bool = False,
    open_feed: bool = False,
) -> Callable[[Callable[..., Executor]], Callable[..., Executor]]:
    def deco(factory: Callable[..., Executor]) -> Callable[..., Executor]:
        _REGISTRY[name] = _Kind(factory, options, streaming, devices, open_feed)
        return factory

    return deco


def _kind(name: str) -> _Kind:
    if name not in _REGISTRY:
        _load_builtin()
    if name not in _REGISTRY:
        raise ConfigError(f"unknown executor {name!r}; choose one of: {', '.join(sorted(_REGISTRY))}")
    return _REGISTRY[name]


def executor_options(cfg: RunConfig, devices: list[str] | None = None) -> dict[str, object]:
    """The options of `cfg.executor`'s factory from `cfg` (and the GPU devices, where it takes them)."""
    kind = _kind(cfg.executor)
    options = kind.options(cfg)
    if devices and kind.devices:
        options["devices"] = list(devices)
    return options


def is_streaming(name: str) -> bool:
    return _kind(name).streaming


def takes_open_feed(name: str) -> bool:
    """Whether the executor's run() takes its (portable) jobs from an iterator as they come, so that one
    run can last as long as an Evaluator's feed; otherwise it is handed each batch as a list."""
    return _kind(name).open_feed


def get_executor(name: str, **options: object) -> Executor:
    return _kind(name).factory(**options)


def _load_builtin() -> None:
    from kbench.executors import local, ray_executor  # noqa: F401  (registration side effect)
