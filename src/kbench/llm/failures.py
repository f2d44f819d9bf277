"""Why a request failed, in one line a user can act on: shown live, stored, and grouped in the summary.

The SDKs' own messages hide the cause: a refused connection reads `APIConnectionError: Connection
error.`, a truncated body `JSONDecodeError: Expecting value ...`. The line starts with the kind (what
`failure_kind` groups by) and ends with the server's words where there are any:

    connection refused by http://127.0.0.1:8000/v1 (after 8 retries)
    HTTP 429 rate limited (after 8 retries): slow down
    bad JSON in the response: Expecting value: line 1 column 25 (char 24)
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

MAX_DETAIL = 200  # characters of the server's message kept after the kind
_STATUS_WORDS = {429: "rate limited", 408: "request timeout", 413: "request too large"}
_SDK_PREFIX = re.compile(r"^Error code: \d+ - ")


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    node: BaseException | None = exc
    while node is not None and id(node) not in seen:
        seen.add(id(node))
        yield node
        node = node.__cause__ or node.__context__


def _status(exc: BaseException) -> int | None:
    code = getattr(exc, "status_code", None)
    return code if isinstance(code, int) else None


def _kind(exc: BaseException, base_url: str | None) -> tuple[str, bool, bool]:
    """(kind, retried, detailed): retried kinds are the ones the SDKs retry before giving up; detailed ones
    take the error's words after them. A refused connection or a timeout is not: no server answered, and
    the SDK's words only restate the kind, in each version its own way (a failed connection keeps them:
    they name why, SSL or DNS)."""
    chain = list(_chain(exc))
    code = next((c for c in map(_status, chain) if c is not None), None)
    if code is not None:
        words = _STATUS_WORDS.get(code) or ("server error" if code >= 500 else "refused")
        return f"HTTP {code} {words}", code == 429 or code >= 500, True
    names = " ".join(type(e).__name__ for e in chain)
    text = " ".join(str(e) for e in chain)
    if any(isinstance(e, ConnectionRefusedError) for e in chain) or "Connection refused" in text:
        return f"connection refused by {base_url or 'the server'}", True, False
    if "Timeout" in names or any(isinstance(e, TimeoutError) for e in chain):
        return "timed out", True, False
    if any(isinstance(e, json.JSONDecodeError) for e in chain) or "JSONDecodeError" in names:
        return "bad JSON in the response", False, True
    if "Connection" in names:
        return f"connection to {base_url or 'the server'} failed", True, True
    return type(exc).__name__, False, True


def _body_message(exc: BaseException) -> str | None:
    """The server's own words in an error body: `{"error": {"message": ...}}` or `{"message": ...}`."""
    body = getattr(exc, "body", None)
    error = body.get("error", body) if isinstance(body, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    return message if isinstance(message, str) else None


def _detail(exc: BaseException) -> str:
    message = _body_message(exc) or getattr(exc, "message", None) or str(exc)
    message = _SDK_PREFIX.sub("", " ".join(str(message).split()))
    if message in ("", "Connection error.", "Request timed out."):
        return ""
    return message[:MAX_DETAIL]


def describe_failure(exc: BaseException, retries: int, base_url: str | None = None) -> str:
    """One line: the kind of failure, the retries spent when the SDK retries that kind, the server's words."""
    kind, retried, detailed = _kind(exc, base_url)
    line = kind + (
        f" (after {retries} {'retry' if retries == 1 else 'retries'})" if retried and retries else ""
    )
    detail = _detail(exc) if detailed else ""
    return f"{line}: {detail}" if detail and detail not in kind else line


def failure_kind(error: str) -> str:
    """The kind a `describe_failure` line starts with (what summaries count by)."""
    return re.split(r" \(after |: ", error, maxsplit=1)[0].strip() or "unknown"
