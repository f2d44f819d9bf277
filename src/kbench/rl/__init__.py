"""kbench as an RL environment: `KernelEnv` (reset/step over the Evaluator), pluggable rewards, and thin
adapters (a Gymnasium-style env, a reward function for TRL's GRPOTrainer)."""

from kbench.rl.adapters import GymKernelEnv, completion_text, grpo_reward
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
    "register_reward",
]
