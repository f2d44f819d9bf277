"""`kbench mcp --http` with the SDK's streamable HTTP client: the bearer token, evaluate on an honest and a
wrong C++ candidate, check, submit into the store, and that no answer of the whole session shows the
secret seed, a reference value or a host path. One server for the module (its Evaluators stay warm); the
tests run in order on one worker, the last one reads what the others were answered."""

from __future__ import annotations

import re
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp.server.mcpserver")

from evalfixtures import fixture_source, use_builds  # noqa: E402
from mcpclient import TOKEN, run_http_session, server_config, server_env, start_http, text_of  # noqa: E402

from kbench.config import FIXED_SEED_BASE  # noqa: E402

pytestmark = pytest.mark.xdist_group("mcp-http")  # one server, its tests in order on one worker

PROBLEM = "2/1"
TRANSCRIPT: list[str] = []  # every tool answer of the module's session


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, shared_builds: Path) -> Iterator[dict[str, Any]]:
    folder = tmp_path_factory.mktemp("mcp-http")
    cache = use_builds(folder / "cache", shared_builds)
    store = folder / "k.db"
    args = ["--config", str(server_config(folder)), "--store", str(store), "--token", TOKEN]
    proc, url = start_http(args, server_env(cache), folder / "server.log")
    yield {"url": url, "store": store, "cache": cache, "folder": folder}
    proc.terminate()
    proc.wait(timeout=60)


def call(url: str, *calls: tuple[str, dict[str, Any]]) -> list[Any]:
    results: list[Any] = []

    async def body(session: Any) -> None:
        for name, args in calls:
            result = await session.call_tool(name, args)
            TRANSCRIPT.append(text_of(result))
            results.append(result)

    run_http_session(url, body)
    return results


@pytest.mark.parametrize("header", [None, "Bearer wrong-token-0123456789", f"Basic {TOKEN}"])
def test_http_needs_the_bearer_token(server: dict[str, Any], header: str | None) -> None:
    request = urllib.request.Request(server["url"], data=b"{}", method="POST")
    request.add_header("Content-Type", "application/json")
    if header is not None:
        request.add_header("Authorization", header)
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(request, timeout=30)
    assert err.value.code == 401


def test_problem_tools_over_http(server: dict[str, Any]) -> None:
    """The tools that read problems, and a refusal, over streamable HTTP (stdio: test_mcp_stdio.py)."""
    listed, shown, inspected, unknown = call(
        server["url"],
        ("list_problems", {"level": 2}),
        ("show_problem", {"problem": PROBLEM}),
        ("inspect", {"problem": PROBLEM}),
        ("show_problem", {"problem": "2/9999"}),
    )
    assert listed.structured_content["count"] > 100 and not listed.is_error
    assert (
        shown.structured_content["problem"] == "kbench:2/1"
        and "class Model" in shown.structured_content["code"]
    )
    assert inspected.structured_content["roofline"]["sol_ms"] > 0
    assert unknown.is_error and "list_problems" in text_of(unknown)


@pytest.mark.slow
def test_evaluate_honest_and_wrong(server: dict[str, Any]) -> None:
    honest, wrong, check = call(
        server["url"],
        ("evaluate", {"problem": PROBLEM, "source": fixture_source("cpp_honest.py")}),
        ("evaluate", {"problem": PROBLEM, "source": fixture_source("cpp_wrong.py")}),
        ("check", {"problem": PROBLEM, "source": fixture_source("cpp_honest.py")}),
    )
    ok = honest.structured_content
    assert not honest.is_error and ok["status"] == "ok", ok
    assert ok["correctness"]["passed"] and "eager" in ok["speedups"] and ok["candidate_ms"] > 0
    bad = wrong.structured_content
    assert bad["status"] == "mismatch" and not bad["correctness"]["passed"], bad
    assert bad["correctness"]["max_abs_err"] > 0 and "differ" in bad["correctness"]["report"]
    built = check.structured_content
    assert built["ok"] and built["build"]["ok"], built


@pytest.mark.slow
def test_submit_is_final_and_stored(server: dict[str, Any]) -> None:
    from kbench.store import Store

    source = fixture_source("cpp_honest.py")
    first, again = call(
        server["url"],
        ("submit", {"problem": PROBLEM, "source": source}),
        ("submit", {"problem": PROBLEM, "source": "class ModelNew: pass"}),
    )
    verdict = first.structured_content
    assert verdict["status"] == "ok" and verdict["run"], verdict
    assert {"eager", "compile"} >= set(verdict["speedups"]) and verdict["speedups"]
    assert (
        again.structured_content["status"] == "ok" and "already submitted" in again.structured_content["note"]
    )
    with Store(server["store"]) as store:
        stored = store.verdicts(verdict["run"])
    assert [(k.problem_key, v.status.value) for k, v in stored] == [("kbench:2/1", "ok")]


@pytest.mark.slow
def test_no_answer_shows_a_secret_a_reference_value_or_a_path(server: dict[str, Any]) -> None:
    from kbench.store import Store

    assert len(TRANSCRIPT) >= 5, "runs after the module's other tests"
    with Store(server["store"]) as store:
        (run,) = [r.run_id for r in store.runs()]
        (_, verdict), *_ = store.verdicts(run)
    assert verdict.correctness is not None
    secret = [s for s in verdict.correctness.seeds if s >= FIXED_SEED_BASE + 3]
    assert secret, "the submit was judged on a secret seed"
    paths = [str(server["cache"]), str(server["folder"]), tempfile.gettempdir() + "/", str(Path.home())]
    for text in TRANSCRIPT:
        assert not any(str(s) in text for s in secret)
        assert not re.search(r"expected -?\d", text), text
        assert not any(p in text for p in paths), text
