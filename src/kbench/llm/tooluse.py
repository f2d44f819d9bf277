"""Tool use: a conversation in which the model calls tools, in one neutral form and in each wire format.

An agent's conversation is a list of `Exchange`s: the user's words, the model's answers (text and tool
calls) and the tools' results. A tool call keeps its arguments as the text the model wrote, so a call
whose arguments are not JSON is kept (and answered with an error) instead of lost. Providers that can use
tools (`openai/...` and every compatible server, `anthropic/...`) turn the exchanges into their own
messages (`openai_messages`, `anthropic_messages`) and their answers back into a `ToolTurn`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ToolSpec:
    """A tool the model may call: its name, what it does, and the JSON schema of its arguments."""

    name: str
    description: str
    schema: dict[str, Any]


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # as the model wrote it: usually a JSON object, perhaps not

    def parsed(self) -> dict[str, Any]:
        """The arguments as an object; ValueError saying what is wrong when they are not one."""
        try:
            value = json.loads(self.arguments or "{}")
        except json.JSONDecodeError as exc:
            raise ValueError(f"the arguments are not valid JSON ({exc.msg} at character {exc.pos})") from None
        if not isinstance(value, dict):
            raise ValueError(f"the arguments must be a JSON object, not {type(value).__name__}")
        return value


@dataclass(frozen=True)
class Exchange:
    """One message. `user`: text. `assistant`: text and the tool calls it makes. `tool`: the result of the
    call `call_id` (an error when `is_error`)."""

    role: str  # user | assistant | tool
    text: str = ""
    calls: tuple[ToolCall, ...] = ()
    call_id: str = ""
    is_error: bool = False

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"role": self.role, "text": self.text}
        if self.calls:
            out["calls"] = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in self.calls]
        if self.role == "tool":
            out |= {"call_id": self.call_id, "is_error": self.is_error}
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Exchange:
        calls = tuple(ToolCall(c["id"], c["name"], c["arguments"]) for c in d.get("calls", ()))
        return cls(d["role"], d.get("text", ""), calls, d.get("call_id", ""), bool(d.get("is_error", False)))


@dataclass(frozen=True)
class ToolTurn:
    """The model's answer to a conversation: its text, its tool calls, what it cost, or why it failed."""

    text: str = ""
    calls: tuple[ToolCall, ...] = ()
    input_tokens: int = 0
    output_tokens: int = 0
    stop_reason: str = ""
    error: str = ""  # the request failed after the SDK's retries (llm/failures.py)
    latency_s: float = 0.0
    cost_usd: float = 0.0

    def exchange(self) -> Exchange:
        return Exchange("assistant", self.text, self.calls)


# OpenAI chat completions ----------------------------------------------------------------------------


def openai_tools(tools: list[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.schema},
        }
        for t in tools
    ]


def openai_messages(system: str, exchanges: list[Exchange]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for e in exchanges:
        if e.role == "tool":
            messages.append({"role": "tool", "tool_call_id": e.call_id, "content": e.text})
        elif e.role == "assistant" and e.calls:
            calls = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in e.calls
            ]
            messages.append({"role": "assistant", "content": e.text or None, "tool_calls": calls})
        else:
            messages.append({"role": e.role, "content": e.text})
    return messages


def openai_turn(message: Any) -> tuple[str, tuple[ToolCall, ...]]:
    """The text and tool calls of an SDK chat-completion message."""
    calls = tuple(
        ToolCall(c.id or f"call_{i}", c.function.name or "", c.function.arguments or "")
        for i, c in enumerate(getattr(message, "tool_calls", None) or [])
        if getattr(c, "function", None) is not None
    )
    return message.content or "", calls


# Anthropic messages ---------------------------------------------------------------------------------


def anthropic_tools(tools: list[ToolSpec]) -> list[dict[str, Any]]:
    return [{"name": t.name, "description": t.description, "input_schema": t.schema} for t in tools]


def anthropic_messages(exchanges: list[Exchange]) -> list[dict[str, Any]]:
    """Anthropic's messages: a tool result is a block of the next user message, and consecutive results
    (of one answer's several calls) share one message, as the API requires."""
    messages: list[dict[str, Any]] = []
    for e in exchanges:
        if e.role == "tool":
            block = {
                "type": "tool_result",
                "tool_use_id": e.call_id,
                "content": e.text,
                "is_error": e.is_error,
            }
            last = messages[-1] if messages else None
            if last and last["role"] == "user" and isinstance(last["content"], list):
                last["content"].append(block)
            else:
                messages.append({"role": "user", "content": [block]})
        elif e.role == "assistant":
            blocks: list[dict[str, Any]] = [{"type": "text", "text": e.text}] if e.text else []
            for c in e.calls:
                try:
                    given = c.parsed()
                except ValueError:
                    given = {}  # never sent so: the API writes its arguments as objects
                blocks.append({"type": "tool_use", "id": c.id, "name": c.name, "input": given})
            messages.append(
                {"role": "assistant", "content": blocks or [{"type": "text", "text": "(no text)"}]}
            )
        else:
            messages.append({"role": "user", "content": e.text})
    return messages


def anthropic_turn(message: Any) -> tuple[str, tuple[ToolCall, ...]]:
    """The text and tool calls of an SDK Message."""
    text = "".join(b.text for b in message.content if getattr(b, "type", "") == "text")
    calls = tuple(
        ToolCall(b.id, b.name, json.dumps(b.input))
        for b in message.content
        if getattr(b, "type", "") == "tool_use"
    )
    return text, calls
