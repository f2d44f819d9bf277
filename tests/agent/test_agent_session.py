"""The agent loop (agent/loop.py) against a scripted model and a stand-in tool server: every call answered
in order, malformed and unknown calls answered with errors, budgets, nudges, failures, and a session
killed mid-call resumed from its stored transcript. The real tools and models: test_agent_run.py."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp.server.mcpserver")

from kbench.agent.loop import GRACE, NUDGE, Ending, Limits, Seat, Session  # noqa: E402
from kbench.llm.base import Request  # noqa: E402
from kbench.llm.tooluse import Exchange, ToolCall, ToolSpec, ToolTurn  # noqa: E402
from kbench.mcp.tools import Budget, Desk  # noqa: E402
from kbench.store import Store  # noqa: E402
from kbench.types import Problem  # noqa: E402

TOOLS = [ToolSpec(n, f"the {n} tool", {"type": "object"}) for n in ("show_problem", "evaluate", "submit")]
PROBLEM = Problem(source="kbench", level=2, number=1, name="p", code="class Model: ...")


class Killed(BaseException):
    """The process dies here (what SIGKILL does to a session, short of the process)."""


class Tools:
    """The MCP server's call_tool, answering from the desk: submit takes the call budget's last word."""

    def __init__(self, desk: Desk, die_on: str = "") -> None:
        self.desk, self.die_on, self.calls = desk, die_on, []

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        from mcp.server.mcpserver.exceptions import ToolError

        from kbench.mcp.tools import ToolRefusal

        self.calls.append((name, arguments))
        if name == self.die_on:
            raise Killed
        try:
            self.desk.counter.spend(evaluation=name == "evaluate", final=name == "submit")
        except ToolRefusal as exc:
            raise ToolError(str(exc)) from None
        if name == "evaluate" and arguments.get("source") == "bad":
            raise ToolError("the build failed")
        answer = {"status": "ok", "tool": name} if name == "submit" else {"tool": name, "args": arguments}
        return type("Result", (), {"structured_content": {"result": answer}, "is_error": False})()


class Model:
    """The model: `script(conversation)` gives each answer; every conversation it was sent is kept."""

    def __init__(self, script: Callable[[list[Exchange]], ToolTurn]) -> None:
        self.script, self.seen = script, []

    async def converse(self, request: Request, exchanges: list[Exchange], tools: list[ToolSpec]) -> ToolTurn:
        self.seen.append(list(exchanges))
        return self.script(exchanges)


def call(name: str, args: dict[str, Any] | str, i: int = 0) -> ToolCall:
    return ToolCall(f"c{i}", name, args if isinstance(args, str) else json.dumps(args))


def answer(*calls: ToolCall, text: str = "", tokens: int = 10) -> ToolTurn:
    return ToolTurn(text, tuple(calls), tokens, tokens)


def session(
    store: Store,
    run_id: str,
    model: Model,
    limits: Limits = Limits(),
    budget: Budget = Budget(),
    die_on: str = "",
) -> tuple[Session, Tools]:
    desk = Desk(budget, PROBLEM.key, 0)
    tools = Tools(desk, die_on)
    seat = Seat(PROBLEM, 0, desk, tools, store, run_id, Request("openai/m", "system", ()))
    return Session(seat, model, limits, TOOLS), tools  # type: ignore[arg-type]


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "k.db")


def run(s: Session) -> Ending | None:
    return asyncio.run(s.run("write ModelNew for 2/1"))


def turns(exchanges: list[Exchange]) -> int:
    return sum(e.role == "assistant" for e in exchanges)


def test_every_call_is_answered_in_order_and_the_submit_ends_the_session(store: Store) -> None:
    script = [
        answer(call("show_problem", {"problem": "2/1"})),
        answer(
            call("evaluate", '{"problem": "2/1", "source": '), call("compile", {}, 1)
        ),  # bad JSON; unknown
        answer(call("evaluate", {"problem": "2/1", "source": "bad"}), call("evaluate", [1, 2], 1)),
        answer(call("submit", {"problem": "2/1", "source": "ok"}), call("show_problem", {}, 1), text="done"),
    ]
    run_id = store.start_run({}, {})
    s, tools = session(store, run_id, Model(lambda ex: script[turns(ex)]))
    ending = run(s)
    assert ending == Ending("submitted", True, {"status": "ok", "tool": "submit"})
    steps = store.transcript(run_id)
    assert [t.role for t in steps] == ["user", "assistant", "tool", "assistant", "tool", "tool", "assistant",
                                       "tool", "tool", "assistant", "tool", "end"]  # fmt: skip
    results = [t.message for t in steps if t.role == "tool"]
    assert [r["is_error"] for r in results] == [False, True, True, True, True, False]
    assert "not valid JSON" in results[1]["text"] and "unknown tool 'compile'" in results[2]["text"]
    assert results[3]["text"] == "the build failed" and "JSON object, not list" in results[4]["text"]
    assert [name for name, _ in tools.calls] == ["show_problem", "evaluate", "submit"]  # after submit: none
    assert steps[-1].message["reason"] == "submitted" and steps[1].input_tokens == 10

    from kbench.report import transcripts

    shown = transcripts.transcript_block(steps)
    assert "agent transcript: 12 steps, 6 tool calls, 80 tokens" in shown
    assert shown.count('class="bad">error') == 4 and "<b>ended</b>: submitted" in shown
    table = transcripts.agents_table([("m", steps, 1)])
    cells = ["m", "1", "1", "1", "6", "6.0", "6.0", "80", "80.0"]  # sessions, submitted, solved, calls ...
    assert "".join(f"<td>{c}</td>" for c in cells) in table
    assert transcripts.effort_line("m", steps, 1) == (
        "m: agent sessions 1, submitted 1, solved 1; tool calls 6 (6.0 a session, 6.0 a solved problem), "
        "tokens 80 (80.0 a solved problem)"
    )


def test_a_spent_budget_gets_one_last_answer_in_which_only_submit_answers(store: Store) -> None:
    run_id = store.start_run({}, {})
    model = Model(lambda ex: answer(call("show_problem", {})) if GRACE[:20] not in ex[-1].text else
                  answer(call("evaluate", {"source": "x"}), call("submit", {"source": "x"}, 1)))  # fmt: skip
    s, tools = session(store, run_id, model, Limits(max_calls=3), Budget(max_calls=3))
    ending = run(s)
    assert ending is not None and ending.submitted  # the submit is taken past the call budget
    tool_steps = [t.message for t in store.transcript(run_id) if t.role == "tool"]
    assert [t["tool"] for t in tool_steps] == ["show_problem"] * 3 + ["evaluate", "submit"]
    assert "only submit is answered now" in tool_steps[3]["text"] and tool_steps[3]["is_error"]
    assert "3 of 3 tool calls" in model.seen[-1][-1].text


def test_a_session_out_of_tokens_that_does_not_submit_ends_unsolved(store: Store) -> None:
    run_id = store.start_run({}, {})
    model = Model(lambda ex: answer(call("show_problem", {}), tokens=300))
    ending = run(session(store, run_id, model, Limits(max_tokens=1000))[0])
    assert ending is not None and not ending.submitted
    assert ending.reason == "budget spent (1,200 of 1,000 tokens) without a submission"
    assert len(model.seen) == 3  # 600 and 1,200 tokens: the grace answer is the third


def test_a_model_that_stops_calling_tools_is_reminded_then_the_session_ends(store: Store) -> None:
    run_id = store.start_run({}, {})
    model = Model(lambda ex: answer(text="here is my kernel: ..."))
    ending = run(session(store, run_id, model, Limits(max_nudges=2))[0])
    assert ending == Ending("the model stopped without submitting", False)
    assert [e.text for e in model.seen[-1] if e.role == "user"][1:] == [NUDGE, NUDGE]


def test_a_failed_request_leaves_the_session_open_and_resume_asks_again(store: Store) -> None:
    run_id = store.start_run({}, {})
    failing = Model(lambda ex: ToolTurn(error="HTTP 500 server error (after 8 retries)"))
    s, _ = session(store, run_id, failing)
    assert run(s) is None and s.error.startswith("HTTP 500")
    assert [t.role for t in store.transcript(run_id)] == ["user"]
    fine = Model(lambda ex: answer(call("submit", {"source": "ok"})))
    assert run(session(store, run_id, fine)[0]) == Ending(
        "submitted", True, {"status": "ok", "tool": "submit"}
    )
    assert [e.role for e in fine.seen[0]] == ["user"]  # the task once, not twice


def test_a_session_killed_among_its_calls_resumes_from_its_transcript(store: Store) -> None:
    run_id = store.start_run({}, {})

    def script(ex: list[Exchange]) -> ToolTurn:
        if turns(ex) == 0:
            return answer(call("show_problem", {}))
        if turns(ex) == 1:
            return answer(call("evaluate", {"source": "y"}), call("show_problem", {}, 1))
        return answer(call("submit", {"source": "y"}))

    first, _ = session(store, run_id, Model(script), budget=Budget(max_evals=5), die_on="evaluate")
    with pytest.raises(Killed):
        run(first)
    assert [t.role for t in store.transcript(run_id)] == ["user", "assistant", "tool", "assistant"]
    model = Model(script)
    again, tools = session(store, run_id, model, budget=Budget(max_evals=5))
    assert run(again) == Ending("submitted", True, {"status": "ok", "tool": "submit"})
    assert [name for name, _ in tools.calls] == [
        "evaluate",
        "show_problem",
        "submit",
    ]  # the pending ones first
    assert again.seat.desk.counter.calls == 4 and again.seat.desk.counter.evals == 1  # restored, then counted
    assert len(model.seen) == 1 and turns(model.seen[0]) == 2  # asked once, with the whole conversation
    steps = store.transcript(run_id)
    assert [t.step for t in steps] == list(range(len(steps))) and steps[-1].role == "end"
    assert run(session(store, run_id, Model(script))[0]) == Ending(
        "submitted", True, {"status": "ok", "tool": "submit"}
    )  # an ended session is not run again
    assert len(store.transcript(run_id)) == len(steps)


def test_a_session_killed_after_its_budget_was_spent_still_gets_its_last_answer(store: Store) -> None:
    run_id = store.start_run({}, {})

    def dies_at_the_grace(ex: list[Exchange]) -> ToolTurn:
        if GRACE[:20] in ex[-1].text:
            raise Killed
        return answer(call("show_problem", {}))

    with pytest.raises(Killed):
        run(session(store, run_id, Model(dies_at_the_grace), Limits(max_calls=2), Budget(max_calls=2))[0])
    last = store.transcript(run_id)[-1]
    assert (last.role, last.message["kind"], last.message["why"]) == ("user", "grace", "2 of 2 tool calls")
    model = Model(lambda ex: answer(text="I give up"))
    ending = run(session(store, run_id, model, Limits(max_calls=2), Budget(max_calls=2))[0])
    assert len(model.seen) == 1 and GRACE[:20] in model.seen[0][-1].text  # the last answer, asked once
    assert ending == Ending("budget spent (2 of 2 tool calls) without a submission", False)
