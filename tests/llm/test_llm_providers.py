"""Providers against a real local HTTP server: both wire formats, streaming, retries, faults, keys."""

from __future__ import annotations

import asyncio
import time

import pytest
from conftest import load_server_module

from kbench.errors import ConfigError
from kbench.llm import GenParams, Message, Request, get_provider
from kbench.llm.failures import failure_kind

LLMServer = load_server_module().LLMServer
ANSWER = "```python\nclass ModelNew:\n    pass\n```"


def _ask(model: str, params: GenParams, text: str = "hello") -> object:
    async def go() -> object:
        provider = get_provider(model, params)
        try:
            return await provider.complete(Request(model, "be brief", (Message("user", text),), params))
        finally:
            await provider.aclose()

    return asyncio.run(go())


@pytest.fixture(autouse=True)
def _keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-openai")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-anthropic")


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_wire_formats_round_trip(api: str, stream: bool) -> None:
    with LLMServer(respond=lambda req: ANSWER + f" {req.last_user}") as server:
        url = server.openai_url if api == "openai" else server.anthropic_url
        c = _ask(f"{api}/test-model", GenParams(base_url=url, stream=stream), "ping")
        seen = server.stats.seen[0]
    assert c.error == "" and c.text == ANSWER + " ping"
    assert c.input_tokens > 0 and c.output_tokens > 0
    assert (
        seen.api == api and seen.model == "test-model" and seen.system == "be brief" and seen.stream is stream
    )
    key = "test-openai" if api == "openai" else "test-anthropic"
    assert key in (
        seen.headers.get("x-api-key", ""),
        seen.headers.get("authorization", "").removeprefix("Bearer "),
    )


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_sdk_retries_429_and_500(api: str) -> None:
    with LLMServer(respond=lambda req: ANSWER, script=["429", "500", "429"]) as server:
        url = server.openai_url if api == "openai" else server.anthropic_url
        c = _ask(f"{api}/m", GenParams(base_url=url, max_retries=5))
        statuses = dict(server.stats.statuses)
    assert c.error == "" and c.text == ANSWER
    assert statuses == {429: 2, 500: 1, 200: 1}


def test_retries_exhausted_is_an_error_completion() -> None:
    with LLMServer(respond=lambda req: ANSWER, p429=1.0) as server:
        c = _ask("openai/m", GenParams(base_url=server.openai_url, max_retries=2))
        assert server.stats.requests == 3  # first try + 2 retries
    assert c.text == "" and "429" in c.error


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_malformed_body_is_an_error_completion(api: str) -> None:
    with LLMServer(respond=lambda req: ANSWER, script=["malformed"]) as server:
        url = server.openai_url if api == "openai" else server.anthropic_url
        c = _ask(f"{api}/m", GenParams(base_url=url, max_retries=0))
    assert c.text == "" and c.error


def test_slow_response_times_out_then_retries() -> None:
    with LLMServer(respond=lambda req: ANSWER, script=["slow"], slow_s=6.0) as server:
        start = time.perf_counter()
        c = _ask("openai/m", GenParams(base_url=server.openai_url, timeout_s=0.5, max_retries=2))
        took = time.perf_counter() - start
        assert server.stats.requests == 2  # the slow one timed out client-side, the retry answered
    assert c.error == "" and c.text == ANSWER
    # did not wait out the 6 s slow answer (0.5 s, a backoff and the retry: ~1-2 s, more on a loaded machine)
    assert took < 5.0, took


def test_missing_key_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        get_provider("openai/m", GenParams())
    with pytest.raises(ConfigError, match="MY_KEY"):
        get_provider("anthropic/m", GenParams(api_key_env="MY_KEY"))


def test_api_key_env_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_KEY", "secret-1")
    with LLMServer(respond=lambda req: ANSWER) as server:
        _ask("openai/m", GenParams(base_url=server.openai_url, api_key_env="MY_KEY"))
        assert server.stats.seen[0].headers.get("authorization") == "Bearer secret-1"


def test_bad_model_strings() -> None:
    with pytest.raises(ConfigError, match="PROVIDER/MODEL"):
        get_provider("gpt-4o")
    with pytest.raises(ConfigError, match="known: anthropic, litellm, openai, replay"):
        get_provider("nosuch/model")


def test_litellm_missing_extra_names_it() -> None:
    pytest.importorskip("kbench")  # always present; litellm itself must be absent for this check
    try:
        import litellm  # noqa: F401

        pytest.skip("litellm is installed here; the missing-extra path cannot be exercised")
    except ImportError:
        pass
    with pytest.raises(ConfigError, match=r"kbench\[litellm\]"):
        get_provider("litellm/gpt-4o")


def test_openai_reasoning_effort_and_token_field() -> None:
    with LLMServer(respond=lambda req: ANSWER) as server:
        _ask("openai/m", GenParams(base_url=server.openai_url, reasoning_effort="high", max_tokens=123))
        body = server.stats.seen[0].body
    assert body["reasoning_effort"] == "high" and body["max_tokens"] == 123


def test_anthropic_reasoning_effort() -> None:
    with LLMServer(respond=lambda req: ANSWER) as server:
        _ask("anthropic/m", GenParams(base_url=server.anthropic_url, reasoning_effort="low", max_tokens=4096))
        body = server.stats.seen[0].body
    # Which field carries the effort depends on the SDK release; exactly one of them must.
    assert (
        body.get("output_config") == {"effort": "low"}
        or body.get("thinking", {}).get("budget_tokens") == 2048
    )
    assert "temperature" not in body


@pytest.mark.parametrize("api", ["openai", "anthropic"])
@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        ("429", "HTTP 429 rate limited (after 1 retry): slow down"),
        ("500", "HTTP 500 server error (after 1 retry): boom"),
        ("malformed", "bad JSON in the response: Expecting value"),
    ],
)
def test_failures_name_their_reason(api: str, fault: str, reason: str) -> None:
    with LLMServer(respond=lambda req: ANSWER, script=[fault] * 3) as server:
        url = server.openai_url if api == "openai" else server.anthropic_url
        c = _ask(f"{api}/m", GenParams(base_url=url, max_retries=1))
    assert c.text == "" and c.error.startswith(reason), c.error
    assert failure_kind(c.error) == reason.split(" (")[0].split(":")[0]


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_refused_connection_names_the_server(api: str) -> None:
    with LLMServer() as server:
        url = server.openai_url if api == "openai" else server.anthropic_url
    # the server is shut down: its port now refuses connections
    c = _ask(f"{api}/m", GenParams(base_url=url, max_retries=0))
    assert c.error == f"connection refused by {url}"
    assert failure_kind(c.error) == f"connection refused by {url}"


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_top_p_is_sent_only_when_set(api: str) -> None:
    with LLMServer(respond=lambda req: ANSWER) as server:
        url = server.openai_url if api == "openai" else server.anthropic_url
        _ask(f"{api}/m", GenParams(base_url=url, temperature=0.7, top_p=0.9))
        _ask(f"{api}/m", GenParams(base_url=url, temperature=0.7))
        first, second = (r.body for r in server.stats.seen)
    assert "top_p" not in second
    if api == "anthropic" and "temperature" not in first:
        assert "top_p" not in first  # SDK releases without sampling parameters take neither
        return
    assert first["top_p"] == 0.9 and first["temperature"] == 0.7
