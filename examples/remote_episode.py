"""A remote RL episode against `kbench serve`: no kbench evaluator on the trainer's side, only its client.

    kbench serve --port 8000 &                 # on the evaluation host (a token: KBENCH_SERVE_TOKEN)
    python examples/remote_episode.py --url http://127.0.0.1:8000

The policy here replays recorded answers to problem 2/1 (examples/recorded_2_1.json): it reads the
episode's messages, answers, and gets the reward and the feedback that becomes its next user turn, until
the episode is done. Replace `policy` with a call to the model being trained.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from kbench.client import Client

HERE = Path(__file__).parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default="http://127.0.0.1:8000")
    ap.add_argument(
        "--token", default=os.environ.get("KBENCH_SERVE_TOKEN"), help="the service's bearer token"
    )
    args = ap.parse_args()
    recorded = json.loads((HERE / "recorded_2_1.json").read_text())
    answers = iter(recorded["completions"])

    def policy(messages: list[dict[str, str]]) -> str:  # a model would read the messages; this one replays
        return next(answers)

    with Client(args.url, token=args.token) as client:
        episode = client.start_episode(recorded["problem"], recorded["backend"], model=recorded["model"],
                                       max_turns=len(recorded["completions"]), stop_when_correct=True)  # fmt: skip
        while True:
            step = client.step(episode.id, policy([m.model_dump() for m in episode.messages]))
            print(f"turn {step.turn}: {step.status.value} reward {step.reward:.3f}")
            if step.done:
                break
            episode = client.episode(episode.id)
        client.end_episode(episode.id)


if __name__ == "__main__":
    main()
