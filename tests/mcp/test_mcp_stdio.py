"""`kbench mcp` over stdio, with the SDK's stdio client: the tools it lists, the problem tools, budgets,
the missing extra, and a whole session that ends in a submit stored with its verdict (the one test here
that runs a candidate)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp.server.mcpserver")

from evalfixtures import fixture_source, use_builds  # noqa: E402
from mcpclient import KBENCH, server_config, server_env, text_of, with_stdio  # noqa: E402

TOOLS = {"list_problems", "show_problem", "check", "evaluate", "profile", "submit", "inspect"}


def test_problem_tools_and_budgets(tmp_path: Path) -> None:
    args = ["--config", str(server_config(tmp_path)), "--store", str(tmp_path / "k.db")]
    args += ["--max-calls", "6", "--max-evals", "1"]
    seen: dict[str, Any] = {}

    async def body(session: Any) -> None:
        seen["tools"] = {t.name: t for t in (await session.list_tools()).tools}
        seen["list"] = await session.call_tool("list_problems", {"level": 2, "tag": "softmax"})
        seen["show"] = await session.call_tool("show_problem", {"problem": "2/1"})
        seen["unknown"] = await session.call_tool("show_problem", {"problem": "/etc/passwd"})
        seen["inspect"] = await session.call_tool("inspect", {"problem": "2/1"})
        seen["check"] = await session.call_tool("check", {"problem": "2/1", "source": "def (:"})
        seen["evals_out"] = await session.call_tool("evaluate", {"problem": "2/1", "source": "x = 1"})
        seen["profile_out"] = await session.call_tool("profile", {"problem": "2/1", "source": "x = 1"})
        seen["sixth"] = await session.call_tool(
            "list_problems", {"level": 3}
        )  # a refused call is not counted
        seen["calls_out"] = await session.call_tool("list_problems", {})

    anyio.run(with_stdio, args, server_env(tmp_path / "cache"), body)

    assert set(seen["tools"]) == TOOLS
    assert "One submit per problem" in seen["tools"]["submit"].description
    assert set(seen["tools"]["evaluate"].input_schema["required"]) == {"problem", "source"}
    listed = seen["list"].structured_content
    assert listed["count"] > 0 and all("softmax" in p["tags"] and p["level"] == 2 for p in listed["problems"])
    show = seen["show"].structured_content
    assert show["problem"] == "kbench:2/1" and show["preset"] == "small" and "class Model" in show["code"]
    assert show["sizes"] and show["input_shapes"] and show["backend"] == "cpp"
    assert seen["unknown"].is_error and "a path is not a problem" in text_of(seen["unknown"])
    assert "/etc" not in text_of(seen["unknown"])
    fusion = seen["inspect"].structured_content
    assert fusion["fusion_groups"][0]["ops"] == ["linear", "relu"] and fusion["roofline"]["sol_ms"] > 0
    check = seen["check"].structured_content
    assert check["ok"] is False and check["findings"][0]["severity"] == "reject"
    assert seen["evals_out"].is_error and "evaluation budget" in text_of(seen["evals_out"])
    assert seen["profile_out"].is_error and "evaluation budget" in text_of(seen["profile_out"])
    assert not seen["sixth"].is_error
    assert seen["calls_out"].is_error and "tool-call budget" in text_of(seen["calls_out"])


@pytest.mark.slow
def test_a_session_ends_in_a_submit_stored_with_its_verdict(tmp_path: Path, shared_builds: Path) -> None:
    """Read, check, profile, submit, and a second submit that judges nothing: the store holds one
    verdict, filed under the server's --model, and each evaluation counted against --max-evals."""
    from kbench.store import Store

    store = tmp_path / "k.db"
    args = ["--config", str(server_config(tmp_path)), "--store", str(store), "--max-evals", "2"]
    args += ["--model", "stdio-agent"]
    honest = fixture_source("cpp_honest.py")
    seen: dict[str, Any] = {}

    async def body(session: Any) -> None:
        seen["show"] = await session.call_tool("show_problem", {"problem": "2/1"})
        seen["check"] = await session.call_tool("check", {"problem": "2/1", "source": honest})
        seen["profile"] = await session.call_tool("profile", {"problem": "2/1", "source": honest})
        seen["submit"] = await session.call_tool("submit", {"problem": "2/1", "source": honest})
        seen["again"] = await session.call_tool(
            "submit", {"problem": "2/1", "source": "class ModelNew: pass"}
        )

    anyio.run(with_stdio, args, server_env(use_builds(tmp_path / "cache", shared_builds)), body)

    assert not any(r.is_error for r in seen.values()), {k: text_of(r) for k, r in seen.items()}
    check, profile = seen["check"].structured_content, seen["profile"].structured_content
    assert check["ok"] and check["evals_left"] == 1
    assert profile["status"] == "ok" and profile["own_kernels"]["ran"] == ["gemm_relu"], profile
    assert profile["reference_profile"]["rows"] and profile["evals_left"] == 0
    verdict, again = seen["submit"].structured_content, seen["again"].structured_content
    assert verdict["status"] == "ok" and verdict["correctness"]["passed"] and verdict["run"], verdict
    assert again == verdict | {"note": again["note"]} and "already submitted" in again["note"]
    with Store(store) as s:
        (run,) = s.runs()
        stored = s.verdicts(run.run_id)
    assert run.run_id == verdict["run"]
    assert [(k.problem_key, k.model, v.status.value) for k, v in stored] == [
        ("kbench:2/1", "stdio-agent", "ok")
    ]


def test_missing_extra_names_the_pip_command(tmp_path: Path) -> None:
    """Without the SDK `kbench mcp` says what to install (a path entry that hides the `mcp` package, as
    Python reports an absent one)."""
    (tmp_path / "mcp").mkdir()
    (tmp_path / "mcp" / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'mcp'\", name='mcp')\n"
    )
    env = server_env(tmp_path / "cache") | {"PYTHONPATH": str(tmp_path)}
    done = subprocess.run(
        [KBENCH, "mcp"], env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
    )
    assert done.returncode == 2, done.stderr
    assert "pip install 'kbench[mcp]'" in done.stderr.replace('"', "'")


def test_http_refuses_to_start_without_a_token(tmp_path: Path) -> None:
    env = server_env(tmp_path / "cache")
    env.pop("KBENCH_MCP_TOKEN", None)
    done = subprocess.run([KBENCH, "mcp", "--http"], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "--no-token" in done.stderr, done.stderr
