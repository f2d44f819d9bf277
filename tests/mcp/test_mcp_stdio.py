"""`kbench mcp` over stdio, with the SDK's stdio client: the tools it lists, the problem tools, budgets,
and the missing extra. Nothing here runs a candidate."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp.server.mcpserver")

from mcpclient import KBENCH, server_config, server_env, text_of, with_stdio  # noqa: E402

TOOLS = {"list_problems", "show_problem", "check", "evaluate", "submit", "inspect"}


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
    assert not seen["sixth"].is_error
    assert seen["calls_out"].is_error and "tool-call budget" in text_of(seen["calls_out"])


def test_missing_extra_names_the_pip_command(tmp_path: Path) -> None:
    """Without the SDK `kbench mcp` says what to install (a path entry that hides the `mcp` package)."""
    (tmp_path / "mcp").mkdir()
    (tmp_path / "mcp" / "__init__.py").write_text("raise ImportError('hidden for this test')\n")
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
