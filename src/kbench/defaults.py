"""Defaults the library decides from the machine, for every caller (CLI, Python API): where a run
evaluates, and what `--solutions` runs.

A GPU backend's candidate on a machine without a GPU can only end in `static_reject`, and the `full` preset is
sized for a GPU (minutes per problem on a CPU), so evaluation defaults to what this machine can measure:
without a GPU, the backend whose `default_on` is the CPU and the `small` preset on the CPU. A backend or device asked for
explicitly is honoured or refused with a ConfigError, never silently replaced. Each function returns the
notice a caller should show when it chose something ('' when it did not).
"""

from __future__ import annotations

from kbench.backends import default_backend, get_backend, gpu_backends
from kbench.config import RunConfig
from kbench.errors import ConfigError

CPU_PRESET = "small"
GPU_PRESET = "full"
CPU_LEVEL = 2  # the shipped solutions a CPU run takes when no problem is chosen (solutions_config)
SHIPPED_SETS = (
    "shipped",
    "reference",
)  # `--solutions` values: the shipped solutions ('reference': the old name)


def gpu_present(device: str) -> bool:
    """Whether `device` (auto | cpu | cuda | cuda:N) evaluates on a GPU on this machine."""
    if device == "cpu":
        return False
    from kbench.hardware import gpu_count

    return gpu_count() > 0


def device_defaults(cfg: RunConfig, what: str = "evaluating") -> tuple[RunConfig, str]:
    """cfg unchanged on a GPU; without one, cpp/small/cpu for every setting the caller left out.

    Raises ConfigError when the caller asked for a backend that needs a GPU, or a cuda device, explicitly.
    """
    if gpu_present(cfg.device):
        return cfg, ""
    explicit = cfg.model_fields_set
    if cfg.device.startswith("cuda"):
        raise ConfigError(f"no GPU for device {cfg.device}: torch sees none here; use --device cpu")
    cpu_backend = get_backend(default_backend(gpu=False))
    if "backend" in explicit and get_backend(cfg.backend).needs_gpu:
        raise ConfigError(
            f"no GPU for backend {cfg.backend}: torch sees none here; use --backend {cpu_backend.name} "
            f"({cpu_backend.title} kernels on the CPU) or run on a GPU machine"
        )
    update: dict[str, object] = {"device": "cpu"}
    chosen = []
    if "backend" not in explicit:
        update["backend"] = cpu_backend.name
        chosen.append(f"the {cpu_backend.name} backend")
    if "preset" not in explicit:
        update["preset"] = CPU_PRESET
        chosen.append(f"the `{CPU_PRESET}` preset")
    notice = f"{what} with {' and '.join(chosen)} on the CPU (pass --backend/--preset to choose)"
    return cfg.model_copy(update=update), notice if chosen else ""


def solution_backends(gpu: bool, backend: str | None) -> list[str]:
    """The backends whose shipped solutions run: the one asked for, else those of this machine's kind."""
    return [backend] if backend else gpu_backends(gpu)


def check_shipped_set(solutions: str) -> None:
    if solutions not in SHIPPED_SETS:
        raise ConfigError(
            f"--solutions {solutions!r}: the shipped set is 'shipped' (or its old name, 'reference')"
        )


def solutions_config(cfg: RunConfig) -> tuple[RunConfig, list[str], str]:
    """The config, backends and notice of a run of the shipped solutions: this machine's backends, the
    `full` preset on a GPU and `small` on the CPU, every problem that has one unless problems are chosen.
    On the CPU, with nothing chosen, level 2's fusion patterns (`CPU_LEVEL`): a first run of a minute or
    two on two cores; level 5's training steps, whose torch.compile baselines compile a backward each, are
    one `--level 5` away, as the notice says."""
    gpu = gpu_present(cfg.device)
    explicit = cfg.model_fields_set
    backends = solution_backends(gpu, cfg.backend if "backend" in explicit else None)
    if not gpu and (on_gpu := [b for b in backends if get_backend(b).gpu_kernels]):
        raise ConfigError(
            f"no GPU for backend {on_gpu[0]}: without one use --backend {default_backend(gpu=False)}"
        )
    update: dict[str, object] = {"solution_backends": backends, "backend": backends[0], "model": ""}
    if "preset" not in explicit:
        update["preset"] = GPU_PRESET if gpu else CPU_PRESET
    notice = ""
    if not gpu:
        update["device"] = "cpu"
        titles = " and ".join(get_backend(b).title for b in gpu_backends(True))
        notice = (
            f"evaluating the shipped {' and '.join(get_backend(b).title for b in backends)} solutions on "
            f"the `small` preset on the CPU; on a GPU machine the same command evaluates the {titles} "
            "solutions"
        )
        if not (cfg.level or cfg.problems or cfg.tags):
            update["level"] = CPU_LEVEL
            notice += f"; level {CPU_LEVEL} (the C++ training steps of level 5: add --level 5)"
    return cfg.model_copy(update=update), backends, notice
