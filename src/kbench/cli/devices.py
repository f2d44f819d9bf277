"""Where a command evaluates: without a GPU, the cpp backend and the `small` preset on the CPU, said once.

A CUDA candidate on a machine without a GPU can only end in `static_reject`, and the `full` preset is
sized for a GPU (minutes per problem on a CPU), so commands that evaluate (`eval`, `run`) default to what
this machine can measure and say so on stderr. A backend or device the user asked for explicitly is
honoured or refused with exit code 2, never silently replaced.
"""

from __future__ import annotations

from kbench.cli.app import err_console
from kbench.config import RunConfig
from kbench.errors import ConfigError

CPU_BACKEND = "cpp"
CPU_PRESET = "small"
NEEDS_GPU = ("cuda",)  # backends that cannot run at all without one (Triton has its CPU interpreter)


def gpu_present(device: str) -> bool:
    """Whether `device` (auto | cpu | cuda | cuda:N) evaluates on a GPU on this machine."""
    if device == "cpu":
        return False
    import torch

    return bool(torch.cuda.is_available())


def device_defaults(cfg: RunConfig, what: str = "evaluating") -> RunConfig:
    """cfg unchanged on a GPU; without one, cpp/small/cpu for every setting the user left out.

    Raises ConfigError (exit 2) when the user asked for the cuda backend or a cuda device explicitly.
    """
    if gpu_present(cfg.device):
        return cfg
    explicit = cfg.model_fields_set
    if cfg.device.startswith("cuda"):
        raise ConfigError(f"no GPU for device {cfg.device}: torch sees none here; use --device cpu")
    if "backend" in explicit and cfg.backend in NEEDS_GPU:
        raise ConfigError(
            f"no GPU for backend {cfg.backend}: torch sees none here; use --backend {CPU_BACKEND} "
            "(C++ kernels on the CPU) or run on a GPU machine"
        )
    update: dict[str, object] = {"device": "cpu"}
    chosen = []
    if "backend" not in explicit:
        update["backend"] = CPU_BACKEND
        chosen.append(f"the {CPU_BACKEND} backend")
    if "preset" not in explicit:
        update["preset"] = CPU_PRESET
        chosen.append(f"the `{CPU_PRESET}` preset")
    if chosen:
        err_console.print(
            f"[yellow]no GPU found:[/] {what} with {' and '.join(chosen)} on the CPU "
            "(pass --backend/--preset to choose)",
            highlight=False,
        )
    return cfg.model_copy(update=update)
