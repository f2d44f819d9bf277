"""The GRPO reward over a batch of completions, as TRL's GRPOTrainer would call it.

    python examples/grpo_reward.py [--device cpu|cuda]

The completions are recorded answers of a model to problem 2/1 (examples/recorded_2_1.json): one without
code, one that is wrong, one that is correct. Each is judged by kbench's evaluator in one batch and
earns its reward (0 for no code or a wrong answer; 1 + log of the speedup for a correct timed one, 1 when
not timed). In a trainer: GRPOTrainer(model, reward_funcs=[grpo_reward(evaluator)], train_dataset=ds),
where the dataset has a `problem` column.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from kbench import Evaluator
from kbench.rl import grpo_reward

HERE = Path(__file__).parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu", help="cpu (C++ kernels, small sizes, not timed) or cuda")
    args = ap.parse_args()
    recorded = json.loads((HERE / "recorded_2_1.json").read_text())
    completions = recorded["completions"]
    on_cpu = args.device == "cpu"
    config = {"device": args.device, "backend": recorded["backend"], "preset": "small" if on_cpu else "full",
              "measure": not on_cpu}  # fmt: skip
    with Evaluator(model=recorded["model"], **config) as evaluator:
        reward = grpo_reward(evaluator)
        rewards = reward(
            prompts=["(the prompt of 2/1)"] * len(completions),
            completions=[[{"role": "assistant", "content": text}] for text in completions],  # conversational
            problem=[recorded["problem"]] * len(completions),
        )
        print(f"run {evaluator.run_id}: rewards {[round(r, 3) for r in rewards]}")


if __name__ == "__main__":
    main()
