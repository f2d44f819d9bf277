"""describe_failure: one line per failed request, the same whatever words the SDK's version chose."""

from __future__ import annotations

from kbench.llm.failures import describe_failure, failure_kind

URL = "http://127.0.0.1:9/v1"


class APIConnectionError(Exception):
    pass


class APITimeoutError(Exception):
    pass


def _raised(outer: Exception, cause: BaseException | None = None) -> Exception:
    try:
        raise outer from cause
    except Exception as exc:
        return exc


def test_a_refused_connection_is_the_kind_alone_whatever_the_sdk_says() -> None:
    """SDK versions word a refusal differently ("Connection error.", or the socket's own message); no
    server answered, so the line is the kind and the retries, nothing else."""
    refused = ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 9)")
    for words in ("Connection error.", "Connection to 127.0.0.1:9 failed: [Errno 111] Connect call failed"):
        line = describe_failure(_raised(APIConnectionError(words), refused), 2, URL)
        assert line == f"connection refused by {URL} (after 2 retries)"
        assert failure_kind(line) == f"connection refused by {URL}"


def test_a_timeout_is_the_kind_alone_and_other_connection_failures_keep_their_reason() -> None:
    line = describe_failure(_raised(APITimeoutError("Request timed out: ReadTimeout('read')")), 1, URL)
    assert line == "timed out (after 1 retry)"
    ssl = "Connection error: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed"
    line = describe_failure(_raised(APIConnectionError(ssl)), 0, URL)
    assert line == f"connection to {URL} failed: {ssl}"  # the reason is what the user acts on
