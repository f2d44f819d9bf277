"""`kbench mcp --http` with the SDK's streamable HTTP client: the bearer token, each tool's refusals,
evaluate on an honest and a wrong C++ candidate, check, profile, submit into the store, and that no answer
of the whole session shows the secret seed, a reference value or a host path. One server for the module
(its Evaluators stay warm); the tests run in order on one worker, the last one reads what the others were
answered."""

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


def test_each_tool_refuses_with_one_line(server: dict[str, Any]) -> None:
    """Refusals are MCP tool errors naming what to do, and judge nothing. The submit is of 2/2: 2/1's is
    test_submit_is_final_and_stored's, after which a submit of 2/1 answers that verdict again."""
    from kbench.backends import backend_names
    from kbench.store import Store

    source = fixture_source("cpp_honest.py")
    refused = call(
        server["url"],
        ("evaluate", {"problem": PROBLEM, "source": source, "backend": "fortran"}),
        ("profile", {"problem": PROBLEM, "source": source, "backend": "fortran"}),
        ("check", {"problem": PROBLEM, "source": source, "backend": "fortran"}),
        ("submit", {"problem": "2/2", "source": source, "backend": "fortran"}),
        ("inspect", {"problem": "2/9999"}),
        ("show_problem", {"problem": "9/1"}),
        ("profile", {"problem": "no_such_problem", "source": source}),
        ("submit", {"problem": "2/9999", "source": source}),
    )
    texts = [text_of(r) for r in refused]
    assert all(r.is_error and not r.structured_content for r in refused), texts
    assert all(
        f"unknown backend 'fortran'; choose one of: {', '.join(backend_names())}" in t for t in texts[:4]
    ), texts
    assert all("list_problems" in t for t in texts[4:]), texts
    with Store(server["store"]) as store:
        assert all(store.verdicts(r.run_id) == [] for r in store.runs())  # nothing was judged


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
def test_profile_shows_own_kernels_the_roofline_and_the_references_operators(server: dict[str, Any]) -> None:
    """On the CPU: the candidate's kernel and its sampled share of CPU time, its time against eager, the
    roofline of the GPU the kernels are for with no fraction of it (a CPU time is not comparable), and
    the reference's aten operators profiled on the CPU. Not recorded (test_submit_is_final_and_stored
    finds only its own verdict in the store)."""
    (profiled,) = call(
        server["url"], ("profile", {"problem": PROBLEM, "source": fixture_source("cpp_honest.py")})
    )
    view = profiled.structured_content
    assert not profiled.is_error and view["status"] == "ok" and view["device"] == "cpu", view
    assert view["own_kernels"] == {
        "ran": ["gemm_relu"],
        "time_share": view["own_kernels"]["time_share"],
        "share_of": "CPU time, sampled",
    }
    assert 0 < view["own_kernels"]["time_share"] <= 1
    assert view["candidate_ms"] > 0 and view["baselines_ms"]["eager"] > 0 and "eager" in view["speedups"]
    assert view["roofline"]["sol_ms"] > 0 and view["roofline"]["gpu"].startswith("H100")
    assert (
        "ran on the CPU" in view["roofline"]["note"] and "sol_fraction" not in view and "sol_ms" not in view
    )
    table = view["reference_profile"]
    assert table["device"] == "cpu" and table["rows_are"].startswith("aten operators")
    assert "aten::addmm" in [row["name"] for row in table["rows"]]
    assert 0.99 <= sum(row["share"] for row in table["rows"]) <= 1.01 and table["launches"] >= 1


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
