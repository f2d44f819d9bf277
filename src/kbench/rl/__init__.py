"""kbench as an RL environment: `KernelEnv` (reset/step over the Evaluator), pluggable rewards, a reward
function for TRL's GRPOTrainer, and `GymKernelEnv`, a `gymnasium.Env` registered as `kbench/Kernel-v0`
(rl/gym.py: the `rl` extra; imported on first use, so kbench.rl itself never needs gymnasium)."""

from typing import Any

from kbench.rl.adapters import completion_text, grpo_reward, grpo_reward_async
from kbench.rl.env import EnvOptions, KernelEnv, StepResult
from kbench.rl.reward import CorrectReward, Reward, SpeedupReward, flagged, get_reward, register_reward

__all__ = [
    "CorrectReward",
    "EnvOptions",
    "GymKernelEnv",
    "KernelEnv",
    "Reward",
    "SpeedupReward",
    "StepResult",
    "completion_text",
    "flagged",
    "get_reward",
    "grpo_reward",
    "grpo_reward_async",
    "register_reward",
]


def __getattr__(name: str) -> Any:
    if name == "GymKernelEnv":
        try:
            from kbench.rl.gym import GymKernelEnv
        except ImportError as exc:
            raise ImportError(
                f"GymKernelEnv needs gymnasium ({exc}): install it with: pip install 'kbench[rl]'"
            ) from None
        return GymKernelEnv
    raise AttributeError(f"module 'kbench.rl' has no attribute {name!r}")
