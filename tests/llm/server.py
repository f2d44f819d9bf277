"""A real HTTP server on 127.0.0.1 speaking the OpenAI chat-completions and Anthropic messages formats.

It serves recorded completions (non-streaming JSON or streaming SSE), injects faults (429 with
retry-after, 500, slow answers, malformed bodies) and counts what it saw: requests per status, the
most requests in flight at once, and successful answers per conversation, so tests can assert that a
client never exceeded its concurrency limit and never asked a finished prompt twice.

    with LLMServer(respond=lambda req: "```python\\nclass ModelNew: ...\\n```", p429=0.2) as server:
        client = openai.OpenAI(base_url=server.openai_url, api_key="test")

`respond` may answer a `Reply` instead of text: text and tool calls, for agents (non-streaming).
"""

from __future__ import annotations

import hashlib
import json
import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """An answer with tool calls: (name, arguments as written, JSON or not) each."""

    text: str = ""
    calls: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class ServedRequest:
    api: str  # "openai" | "anthropic"
    model: str
    system: str
    messages: list[dict[str, Any]]
    stream: bool
    body: dict[str, Any]
    headers: dict[str, str]  # names lower-cased

    @property
    def tool_results(self) -> list[str]:
        """The tools' answers the conversation holds, in order (either API's form)."""
        out = [_text(m.get("content")) for m in self.messages if m.get("role") == "tool"]
        for m in self.messages:
            if m.get("role") == "user" and isinstance(m.get("content"), list):
                out += [_text(b.get("content")) for b in m["content"] if b.get("type") == "tool_result"]
        return out

    @property
    def last_user(self) -> str:
        users = [m for m in self.messages if m.get("role") == "user"]
        return _text(users[-1]["content"]) if users else ""

    @property
    def key(self) -> str:
        """Identifies the conversation (not the attempt): the same prompt asked twice has the same key."""
        blob = json.dumps([self.model, self.system, self.messages], sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if isinstance(part, dict))


@dataclass
class Stats:
    lock: threading.Lock = field(default_factory=threading.Lock)
    requests: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    in_flight: int = 0
    max_in_flight: int = 0
    answered: Counter[str] = field(default_factory=Counter)  # conversation key -> 200 answers
    seen: list[ServedRequest] = field(default_factory=list)


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # 16+ clients connect at once; the default backlog of 5 would reset some

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client killed mid-request (the resumability benchmark does that on purpose) is not an error.
        return None


class LLMServer:
    """Fault rates are probabilities per request, drawn from a seeded RNG; `script` faults come first."""

    def __init__(
        self,
        respond: Callable[[ServedRequest], str | Reply] | None = None,
        p429: float = 0.0,
        p500: float = 0.0,
        p_malformed: float = 0.0,
        delay_s: float = 0.0,
        script: list[str] | None = None,
        seed: int = 0,
        retry_after_ms: int = 5,
        slow_s: float = 2.0,
    ) -> None:
        self.respond = respond or (lambda req: "no completion recorded")
        self.p429, self.p500, self.p_malformed = p429, p500, p_malformed
        self.delay_s = delay_s
        self.slow_s = slow_s  # how long a scripted "slow" answer takes
        self.script = list(script or [])  # e.g. ["429", "500", "malformed", "slow"]
        self.rng = random.Random(seed)
        self.retry_after_ms = retry_after_ms
        self.stats = Stats()
        self.httpd = _QuietServer(("127.0.0.1", 0), _handler(self))
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    @property
    def openai_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def anthropic_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> LLMServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def next_fault(self) -> str:
        with self.stats.lock:
            if self.script:
                return self.script.pop(0)
            r = self.rng.random()
        for name, p in (("429", self.p429), ("500", self.p500), ("malformed", self.p_malformed)):
            if r < p:
                return name
            r -= p
        return ""


def _handler(server: LLMServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the SDKs' connection pools expect

        def log_message(self, format: str, *args: Any) -> None:
            return None

        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
            api = "anthropic" if self.path.rstrip("/").endswith("/messages") else "openai"
            req = _parse(api, body, {k.lower(): v for k, v in self.headers.items()})
            stats = server.stats
            with stats.lock:
                stats.requests += 1
                stats.in_flight += 1
                stats.max_in_flight = max(stats.max_in_flight, stats.in_flight)
                stats.seen.append(req)
            status = 0  # stays 0 when the client hung up before the answer was written
            try:
                status = self._serve(server, req)
            finally:
                with stats.lock:
                    stats.in_flight -= 1
                    stats.statuses[status] += 1
                    if status == 200:
                        stats.answered[req.key] += 1

        def _serve(self, server: LLMServer, req: ServedRequest) -> int:
            fault = server.next_fault()
            if server.delay_s or fault == "slow":
                time.sleep(server.delay_s or server.slow_s)
            if fault == "429":
                err = {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}
                return self._json(429, err, {"retry-after-ms": str(server.retry_after_ms)})
            if fault == "500":
                return self._json(500, {"type": "error", "error": {"type": "api_error", "message": "boom"}})
            if fault == "malformed":
                return self._raw(200, b'{"id": "x", "choices": [', "application/json")
            text = server.respond(req)
            if isinstance(text, Reply):
                body = _openai_calls(req, text) if req.api == "openai" else _anthropic_calls(req, text)
                return self._json(200, body)
            if req.stream:
                return self._sse(_sse_events(req, text))
            return self._json(
                200, _openai_body(req, text) if req.api == "openai" else _anthropic_body(req, text)
            )

        def _json(self, status: int, data: dict[str, Any], headers: dict[str, str] | None = None) -> int:
            return self._raw(status, json.dumps(data).encode(), "application/json", headers)

        def _raw(self, status: int, payload: bytes, ctype: str, headers: dict[str, str] | None = None) -> int:
            self.send_response(status)
            self.send_header("content-type", ctype)
            self.send_header("content-length", str(len(payload)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(payload)
            return status

        def _sse(self, events: list[tuple[str | None, str]]) -> int:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("connection", "close")  # no length: the end of the stream is the close
            self.end_headers()
            self.close_connection = True
            for event, data in events:
                head = f"event: {event}\n" if event else ""
                self.wfile.write(f"{head}data: {data}\n\n".encode())
                self.wfile.flush()
            return 200

    return Handler


def _parse(api: str, body: dict[str, Any], headers: dict[str, str]) -> ServedRequest:
    messages = list(body.get("messages", []))
    system = body.get("system", "")
    if api == "openai" and messages and messages[0].get("role") == "system":
        system = _text(messages.pop(0)["content"])
    return ServedRequest(
        api, body.get("model", ""), _text(system), messages, bool(body.get("stream")), body, headers
    )


def _tokens(req: ServedRequest, text: str) -> tuple[int, int]:
    prompt = req.system + "".join(_text(m["content"]) for m in req.messages)
    return max(1, len(prompt) // 4), max(1, len(text) // 4)  # ~4 characters per token


def _openai_body(req: ServedRequest, text: str) -> dict[str, Any]:
    tin, tout = _tokens(req, text)
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 0,
        "model": req.model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": tin, "completion_tokens": tout, "total_tokens": tin + tout},
    }


def _anthropic_body(req: ServedRequest, text: str) -> dict[str, Any]:
    tin, tout = _tokens(req, text)
    return {
        "id": "msg_test",
        "type": "message",
        "role": "assistant",
        "model": req.model,
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": tin, "output_tokens": tout},
    }


def _call_id(req: ServedRequest, i: int) -> str:
    return f"call_{req.key[:8]}_{len(req.messages)}_{i}"  # unique within a conversation


def _openai_calls(req: ServedRequest, reply: Reply) -> dict[str, Any]:
    body = _openai_body(req, reply.text)
    calls = [
        {"id": _call_id(req, i), "type": "function", "function": {"name": name, "arguments": args}}
        for i, (name, args) in enumerate(reply.calls)
    ]
    message = {"role": "assistant", "content": reply.text or None}
    if calls:
        message["tool_calls"] = calls
    body["choices"][0] |= {"message": message, "finish_reason": "tool_calls" if calls else "stop"}
    return body


def _anthropic_calls(req: ServedRequest, reply: Reply) -> dict[str, Any]:
    body = _anthropic_body(req, reply.text)
    blocks = [{"type": "text", "text": reply.text}] if reply.text else []
    for i, (name, args) in enumerate(reply.calls):
        blocks.append({"type": "tool_use", "id": _call_id(req, i), "name": name, "input": json.loads(args)})
    return body | {"content": blocks, "stop_reason": "tool_use" if reply.calls else "end_turn"}


def _pieces(text: str, n: int = 3) -> list[str]:
    step = max(1, len(text) // n)
    return [text[i : i + step] for i in range(0, len(text), step)] or [""]


def _sse_events(req: ServedRequest, text: str) -> list[tuple[str | None, str]]:
    tin, tout = _tokens(req, text)
    if req.api == "openai":
        base = {"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 0, "model": req.model}
        out = []
        for piece in _pieces(text):
            delta = {"index": 0, "delta": {"role": "assistant", "content": piece}, "finish_reason": None}
            out.append((None, json.dumps(base | {"choices": [delta]})))
        out.append(
            (None, json.dumps(base | {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}))
        )
        usage = {"prompt_tokens": tin, "completion_tokens": tout, "total_tokens": tin + tout}
        out.append((None, json.dumps(base | {"choices": [], "usage": usage})))
        return [*out, (None, "[DONE]")]
    start = _anthropic_body(req, "") | {
        "content": [],
        "stop_reason": None,
        "usage": {"input_tokens": tin, "output_tokens": 1},
    }
    events: list[tuple[str | None, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": start}),
        (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        ),
    ]
    for piece in _pieces(text):
        delta = {"type": "text_delta", "text": piece}
        events.append(("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}))
    events += [
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": tout},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return [(name, json.dumps(data)) for name, data in events]
