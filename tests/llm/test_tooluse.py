"""Tool use over both wire formats against the local server: the tools and the conversation as each API
wants them (OpenAI's tool messages, Anthropic's tool_result blocks grouped in one user message), tool
calls read back, arguments that are not JSON kept as written, usage counted."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from conftest import load_server_module

from kbench.llm import GenParams, LLMClient, Request, get_provider
from kbench.llm.tooluse import Exchange, ToolCall, ToolSpec

server_module = load_server_module()
TOOLS = [ToolSpec("evaluate", "run it", {"type": "object", "properties": {"source": {"type": "string"}}})]
HISTORY = [
    Exchange("user", "write a kernel"),
    Exchange(
        "assistant",
        "two tries",
        (ToolCall("a1", "evaluate", '{"source": "x"}'), ToolCall("a2", "evaluate", "{bad")),
    ),
    Exchange("tool", '{"status": "ok"}', call_id="a1"),
    Exchange("tool", "not valid JSON", call_id="a2", is_error=True),
]


def converse(api: str, reply: Any, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any, LLMClient]:
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
    with server_module.LLMServer(respond=lambda req: reply) as server:
        url = server.openai_url if api == "openai" else server.anthropic_url
        params = GenParams(base_url=url, max_retries=0)
        client = LLMClient(get_provider(f"{api}/m", params))
        request = Request(f"{api}/m", "you write kernels", (), params)

        async def go() -> Any:
            try:
                return await client.converse(request, HISTORY, TOOLS)
            finally:
                await client.aclose()

        turn = asyncio.run(go())
        (seen,) = server.stats.seen
    return turn, seen, client


def test_openai_tool_calls_and_history(monkeypatch: pytest.MonkeyPatch) -> None:
    reply = server_module.Reply("again", [("evaluate", '{"source": "y"}'), ("evaluate", "{not json")])
    turn, seen, client = converse("openai", reply, monkeypatch)
    assert seen.body["tools"] == [{"type": "function", "function": {"name": "evaluate", "description": "run it",
                                   "parameters": TOOLS[0].schema}}]  # fmt: skip
    roles = [m["role"] for m in seen.messages]
    assert roles == ["user", "assistant", "tool", "tool"] and seen.system == "you write kernels"
    assert seen.messages[1]["tool_calls"][1]["function"] == {"name": "evaluate", "arguments": "{bad"}
    assert seen.messages[3] == {"role": "tool", "tool_call_id": "a2", "content": "not valid JSON"}
    assert turn.text == "again" and [c.name for c in turn.calls] == ["evaluate", "evaluate"]
    assert turn.calls[0].parsed() == {"source": "y"} and turn.calls[1].arguments == "{not json"
    with pytest.raises(ValueError, match="not valid JSON"):
        turn.calls[1].parsed()
    assert turn.input_tokens > 0 and client.usage.requests == 1 and turn.stop_reason == "tool_calls"


def test_anthropic_tool_use_and_grouped_results(monkeypatch: pytest.MonkeyPatch) -> None:
    turn, seen, _ = converse(
        "anthropic", server_module.Reply("", [("evaluate", '{"source": "z"}')]), monkeypatch
    )
    assert seen.body["tools"] == [
        {"name": "evaluate", "description": "run it", "input_schema": TOOLS[0].schema}
    ]
    assert [m["role"] for m in seen.messages] == ["user", "assistant", "user"]  # both results, one message
    uses = [b for b in seen.messages[1]["content"] if b["type"] == "tool_use"]
    assert [(b["id"], b["input"]) for b in uses] == [("a1", {"source": "x"}), ("a2", {})]
    results = seen.messages[2]["content"]
    assert [(r["tool_use_id"], r["is_error"]) for r in results] == [("a1", False), ("a2", True)]
    assert turn.text == "" and json.loads(turn.calls[0].arguments) == {"source": "z"}
    assert turn.stop_reason == "tool_use"


def test_a_failed_request_is_a_turn_with_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    with server_module.LLMServer(script=["500"]) as server:
        params = GenParams(base_url=server.openai_url, max_retries=0)
        client = LLMClient(get_provider("openai/m", params))
        turn = asyncio.run(client.converse(Request("openai/m", "", (), params), HISTORY[:1], TOOLS))
    assert turn.error.startswith("HTTP 500") and not turn.calls and client.usage.errors == 1
