"""Client: concurrency limit, response cache keying, cost accounting; the replay provider."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from conftest import load_server_module

from kbench.errors import ConfigError
from kbench.llm import (
    GenParams,
    LLMClient,
    Message,
    Request,
    ResponseCache,
    cache_key,
    cost_usd,
    get_provider,
)
from kbench.types import Completion

LLMServer = load_server_module().LLMServer


def _req(text: str = "q", sample: int = 0, **kw: object) -> Request:
    return Request("openai/gpt-4o", "sys", (Message("user", text),), GenParams(**kw), sample=sample)  # type: ignore[arg-type]


def test_cache_key_covers_model_prompt_params_sample() -> None:
    base = cache_key(_req())
    assert base == cache_key(_req())
    assert (
        len({base, cache_key(_req("other")), cache_key(_req(sample=1)), cache_key(_req(temperature=0.7))})
        == 4
    )
    assert cache_key(_req(timeout_s=5.0)) == base  # connection settings do not change the answer
    assert cache_key(_req(top_p=0.9)) != base and cache_key(_req(top_p=None)) == base


def test_a_cache_hit_costs_nothing_and_keeps_its_tokens(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path)
    cache.put(
        _req(sample=2), Completion("openai/gpt-4o", "answer", input_tokens=3, cost_usd=0.5, latency_s=2.0)
    )
    hit = cache.get(_req(sample=2))
    assert hit is not None and (hit.cost_usd, hit.latency_s, hit.input_tokens, hit.sample) == (0.0, 0.0, 3, 2)
    assert cache.get(_req(sample=1)) is None  # another sample of the same prompt is another entry


def test_cache_round_trip_and_errors_not_cached(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path)
    cache.put(_req(), Completion("openai/gpt-4o", "answer", input_tokens=3))
    cache.put(_req("bad"), Completion("openai/gpt-4o", "", error="500"))
    hit = cache.get(_req(sample=0))
    assert hit is not None and hit.text == "answer" and hit.cached and hit.input_tokens == 3
    assert cache.get(_req("bad")) is None


def test_cost_by_longest_prefix() -> None:
    assert cost_usd("openai/gpt-4o-mini-2024", 1_000_000, 0) == pytest.approx(0.15)
    assert cost_usd("openai/gpt-4o", 0, 1_000_000) == pytest.approx(10.0)
    assert cost_usd("openai/local-llama", 10**6, 10**6) == 0.0


def test_concurrency_limit_holds_with_429s(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    with LLMServer(respond=lambda r: "ok", p429=0.3, delay_s=0.02) as server:
        params = GenParams(base_url=server.openai_url)
        client = LLMClient.create("openai/m", params, concurrency=4, cache_dir=tmp_path)

        async def go() -> list[Completion]:
            reqs = [Request("openai/m", "", (Message("user", f"p{i}"),), params, sample=i) for i in range(40)]
            try:
                return list(await asyncio.gather(*(client.complete(r) for r in reqs)))
            finally:
                await client.aclose()

        done = asyncio.run(go())
        assert server.stats.max_in_flight == 4  # the limit, and reached
        assert server.stats.statuses[429] > 0 and sum(server.stats.answered.values()) == 40
    assert all(c.text == "ok" and not c.error for c in done)
    assert client.usage.requests == 40 and client.usage.errors == 0


def test_replay_serves_kernelbench_and_kbench_files(tmp_path: Path) -> None:
    (tmp_path / "level_2_problem_3_sample_0_kernel.py").write_text("class ModelNew: k = 0\n")
    (tmp_path / "level_2_problem_3_sample_1_turn_0.py").write_text("class ModelNew: candidate = 1\n")
    (tmp_path / "level_2_problem_3_sample_1_turn_0.md").write_text("raw completion\n")
    provider = get_provider(f"replay/{tmp_path}")

    def ask(level: int, number: int, sample: int, turn: int = 0) -> Completion:
        r = Request("replay/x", "", (), level=level, number=number, sample=sample, turn=turn)
        return asyncio.run(provider.complete(r))

    assert ask(2, 3, 0).text == "class ModelNew: k = 0\n"
    assert ask(2, 3, 1).text == "raw completion\n"  # the completion wins over the candidate
    missing = ask(2, 4, 0)
    assert missing.text == "" and "level 2 problem 4 sample 0" in missing.error
    assert provider.errors_are_final and not provider.cacheable


def test_replay_needs_an_existing_folder_with_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such folder"):
        get_provider(f"replay/{tmp_path / 'nope'}")
    with pytest.raises(ConfigError, match="no files named"):
        get_provider(f"replay/{tmp_path}")
