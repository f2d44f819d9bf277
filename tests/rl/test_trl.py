"""kbench's GRPO reward inside TRL's own GRPOTrainer (the `trl` extra), on the CPU: a training step whose
completions are judged by a real Evaluator (cpp on problem 2/1), once with the reward function TRL calls
and once with the coroutine it awaits on its event loop.

The policy is a one-layer GPT-2 made here, with a tokenizer built from the completions' own pieces (no
download); its `generate` answers each prompt in turn with recorded completions -- no code, a wrong kernel,
an honest one -- so the rewards, and the advantages TRL computes from them, are known. Everything else is
TRL's: the batch it builds, the columns it passes the reward function, the loss and the logged metrics."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from apifixtures import HONEST, WRONG, api_config, shared_cache
from optional import needs

from kbench.api import Evaluator
from kbench.rl import grpo_reward, grpo_reward_async
from kbench.store import Store
from kbench.types import Status

pytestmark = [pytest.mark.slow, needs("trl")]
# Per prompt, its group of two generations: no code and an honest kernel, then a wrong and an honest one.
ANSWERS = [
    "I would fuse the GEMM with the ReLU.",
    f"```python\n{HONEST}\n```",
    f"```python\n{WRONG}\n```",
    f"```python\n{HONEST}\n```",
]
# The Evaluator of these tests does not time (api_config): ok earns 1, with no speed term.
EXPECTED = {
    ANSWERS[0]: (0.0, Status.NO_CODE),
    ANSWERS[1]: (1.0, Status.OK),
    ANSWERS[2]: (0.0, Status.MISMATCH),
}
PIECES = re.compile(r"\s+|\w+|[^\w\s]")  # whitespace runs kept: decoding gives the text back exactly


def _tokenizer() -> Any:
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    pieces = sorted({p for text in [*ANSWERS, "2/1: write ModelNew"] for p in PIECES.findall(text)})
    vocab = {"<pad>": 0, "<eos>": 1, **{p: i + 2 for i, p in enumerate(pieces)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<pad>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(PIECES.pattern), behavior="isolated")
    tok.decoder = decoders.Fuse()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>")
    fast.padding_side = "left"
    assert fast.decode(fast(ANSWERS[1]).input_ids) == ANSWERS[1]
    return fast


def _policy(tokenizer: Any) -> Any:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    class Recorded(GPT2LMHeadModel):  # type: ignore[misc]
        """A GPT-2 whose generations are the recorded answers, in turn (its forward is GPT-2's)."""

        turn = 0

        def generate(self, input_ids: Any = None, **kwargs: Any) -> Any:
            rows = []
            for row in input_ids:
                text = ANSWERS[Recorded.turn % len(ANSWERS)]
                Recorded.turn += 1
                answer = tokenizer(text).input_ids + [tokenizer.eos_token_id]
                rows.append(torch.cat([row, torch.tensor(answer, dtype=row.dtype)]))
            width = max(len(r) for r in rows)
            pad = tokenizer.pad_token_id
            return torch.stack([torch.cat([r, r.new_full((width - len(r),), pad)]) for r in rows])

    size = max(len(tokenizer(a).input_ids) for a in ANSWERS) + 64
    config = GPT2Config(
        vocab_size=len(tokenizer), n_positions=size, n_embd=32, n_layer=1, n_head=2,
        bos_token_id=1, eos_token_id=1, pad_token_id=0,
    )  # fmt: skip
    return Recorded(config), size


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("trl") / "k.db"


@pytest.fixture(scope="module")
def ev(tmp_path_factory: pytest.TempPathFactory, store: Path, shared_builds: Path) -> Iterator[Evaluator]:
    with Evaluator(
        api_config(shared_cache(tmp_path_factory, shared_builds), store), model="trl"
    ) as evaluator:
        yield evaluator


@pytest.mark.parametrize("awaited", [False, True], ids=["sync", "async"])
def test_a_trl_grpo_step_is_rewarded_by_the_evaluator(
    ev: Evaluator, store: Path, tmp_path: Path, awaited: bool
) -> None:
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    tokenizer = _tokenizer()
    policy, size = _policy(tokenizer)
    reward = (grpo_reward_async if awaited else grpo_reward)(ev)
    seen: list[tuple[list[str], list[float], list[str]]] = []

    def recorded(completions: Any, **kwargs: Any) -> list[float]:
        got = reward(completions=completions, **kwargs)
        seen.append((list(completions), list(got), list(kwargs.get("problem", []))))
        return got

    async def recorded_async(completions: Any, **kwargs: Any) -> list[float]:
        got = await reward(completions=completions, **kwargs)
        seen.append((list(completions), list(got), list(kwargs.get("problem", []))))
        return got

    judge = recorded_async if awaited else recorded
    judge.__name__ = reward.__name__
    args = GRPOConfig(
        output_dir=str(tmp_path / "out"), max_steps=1, per_device_train_batch_size=4, num_generations=2,
        max_completion_length=size, use_cpu=True, report_to=[], logging_steps=1, save_strategy="no",
    )  # fmt: skip
    data = Dataset.from_dict({"prompt": ["2/1: write ModelNew"] * 2, "problem": ["2/1"] * 2})
    trainer = GRPOTrainer(
        model=policy, reward_funcs=[judge], args=args, train_dataset=data, processing_class=tokenizer
    )
    trainer.train()

    assert len(seen) == 1, seen  # one batch: both prompts, two generations each
    completions, rewards, problems = seen[0]
    assert sorted(completions) == sorted(ANSWERS) and problems == ["2/1"] * 4
    assert rewards == [EXPECTED[text][0] for text in completions]
    logged = trainer.state.log_history[0]
    assert logged["rewards/kbench_reward/mean"] == pytest.approx(0.5)
    assert logged["frac_reward_zero_std"] == 0.0  # each group's two answers were told apart
    with Store(store) as db:
        filed = db.records(ev.run_id or "")[-4:]  # this step's batch, each completion a sample of the run
    assert sorted((r.completion_text, r.verdict.status) for r in filed) == sorted(
        (text, EXPECTED[text][1]) for text in completions
    )
