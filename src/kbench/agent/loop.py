"""One agent session: a tool-calling model works one problem with kbench's MCP tools until it submits.

The tools are the `kbench mcp` server's own (mcp/server.py), called in this process: the same names,
schemas, answers and refusals an outside harness gets, on a desk (mcp/tools.py `Desk`) bound to the
session's problem and sample. A turn asks the model for an answer; each of its tool calls is answered in
order (a call to an unknown tool or with arguments that are not a JSON object gets an error result, and
the session goes on); the session ends when a submit is answered, when the model stops calling tools
(after `max_nudges` reminders), or when a budget is spent: then the model is told so and gets one last
answer in which only submit is answered. Budgets: tool calls, check/evaluate/profile calls and their
seconds (the desk refuses past them), tokens and wall time (checked before each answer).

Every step is written to the store as it happens (`TranscriptStep`): the task, each answer with its
tokens, each tool result with its seconds and the desk's counts after it, and the ending. A session
killed at any point resumes from its transcript: the conversation is rebuilt, the counts restored, a
tool call left unanswered is answered, and a session with an ending is not run again. A request that
fails after the SDK's retries stops the session without an ending, so `--resume` asks again.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace
from typing import Any

from kbench.llm.base import Request
from kbench.llm.client import LLMClient
from kbench.llm.tooluse import Exchange, ToolCall, ToolSpec, ToolTurn
from kbench.mcp.tools import Desk
from kbench.store import RequestRecord, Store, TranscriptStep
from kbench.types import Problem

SUBMIT = "submit"
NUDGE = (
    "You answered without calling a tool. Work with the tools: check and evaluate your candidate, then "
    "give your final answer with submit (a whole Python file defining class ModelNew)."
)
GRACE = (
    "This session's budget is spent ({why}). Call submit now with your best candidate: no other tool "
    "answers any more, and without a submit the problem counts as unsolved."
)


@dataclass(frozen=True)
class Limits:
    """What the session checks before each answer (the desk holds the tool budgets)."""

    max_tokens: int | None = None  # input + output tokens of all answers
    max_wall_s: float | None = None  # seconds of answers and tool calls
    max_calls: int | None = None  # tool calls: past them, the last answer (the desk refuses too)
    max_nudges: int = 2  # reminders after answers without a tool call


@dataclass(frozen=True)
class Ending:
    reason: str  # submitted | budget spent (...) | stopped without submitting | ...
    submitted: bool
    answer: dict[str, Any] | None = None  # the submit's answer (the verdict as the tool shows it)


@dataclass
class Seat:
    """Where a session runs: its problem and sample, its desk, the MCP server on it, and the store."""

    problem: Problem
    sample: int
    desk: Desk
    server: Any  # mcp.server.mcpserver.MCPServer on Workbench.seat(desk)
    store: Store
    run_id: str
    request: Request  # model, system prompt, sampling parameters; its messages are unused


async def tool_specs(server: Any) -> list[ToolSpec]:
    return [ToolSpec(t.name, t.description or "", t.input_schema) for t in await server.list_tools()]


class Session:
    def __init__(self, seat: Seat, client: LLMClient, limits: Limits, tools: list[ToolSpec]) -> None:
        self.seat, self.client, self.limits, self.tools = seat, client, limits, tools
        self.names = {t.name for t in tools}
        self.steps: list[TranscriptStep] = []
        self.exchanges: list[Exchange] = []
        self.tokens = 0
        self.active_s = 0.0
        self.nudges = 0
        self.grace = ""  # why the budget is spent, once the model was told so: then it has one answer left
        self.grace_answered = False  # the model gave that answer
        self.ending: Ending | None = None
        self.error = ""  # the failed request's reason, when the session stopped on one

    # the session ---------------------------------------------------------------------------------------

    async def run(self, task: str) -> Ending | None:
        """Run (or go on with) the session; its ending, or None when a model request failed."""
        self._restore()
        if self.ending is not None:
            return self.ending
        if not self.exchanges:
            self._user(task, "task")
        await self._answer_pending()
        while self.ending is None:
            if self.grace and self.grace_answered:  # its last answer submitted nothing
                self._end(Ending(f"budget spent ({self.grace}) without a submission", False))
                break
            spent = "" if self.grace else self._spent()
            if spent:
                self._user(GRACE.format(why=spent), "grace", why=spent)
                self.grace = spent
            turn = await self._ask()
            if turn is None:
                return None
            self.grace_answered = bool(self.grace)
            if turn.calls:
                await self._answer(turn.calls)
            elif self.grace:
                continue  # ends above
            elif self.nudges >= self.limits.max_nudges:
                self._end(Ending("the model stopped without submitting", False))
            else:
                self.nudges += 1
                self._user(NUDGE, "nudge")
        return self.ending

    def _spent(self) -> str:
        lim, counter = self.limits, self.seat.desk.counter
        if lim.max_tokens is not None and self.tokens >= lim.max_tokens:
            return f"{self.tokens:,} of {lim.max_tokens:,} tokens"
        if lim.max_wall_s is not None and self.active_s >= lim.max_wall_s:
            return f"{self.active_s:.0f} of {lim.max_wall_s:g} s"
        if lim.max_calls is not None and counter.calls >= lim.max_calls:
            return f"{counter.calls} of {lim.max_calls} tool calls"
        return ""

    async def _ask(self) -> ToolTurn | None:
        seat = self.seat
        request = replace(seat.request, turn=len(self.steps))
        turn = await self.client.converse(request, self.exchanges, self.tools)
        seat.store.record_request(
            seat.run_id,
            RequestRecord(seat.problem.key, seat.sample, len(self.steps), False, turn.error,
                          turn.input_tokens, turn.output_tokens, turn.cost_usd, turn.latency_s),
        )  # fmt: skip
        if turn.error:
            self.error = turn.error
            return None
        exchange = turn.exchange()
        self._keep("assistant", exchange.to_dict(), turn.input_tokens, turn.output_tokens, turn.latency_s)
        self.exchanges.append(exchange)
        self.tokens += turn.input_tokens + turn.output_tokens
        self.active_s += turn.latency_s
        return turn

    async def _answer_pending(self) -> None:
        """Answer the calls of the last answer that have no result (a session killed among its calls)."""
        last = next(
            (i for i in range(len(self.exchanges) - 1, -1, -1) if self.exchanges[i].role == "assistant"), None
        )
        if last is None:
            return
        answered = {e.call_id for e in self.exchanges[last + 1 :] if e.role == "tool"}
        pending = [c for c in self.exchanges[last].calls if c.id not in answered]
        if pending:
            await self._answer(pending)

    async def _answer(self, calls: tuple[ToolCall, ...] | list[ToolCall]) -> None:
        for call in calls:
            start = time.monotonic()
            text, is_error = await self._call(call)
            seconds = time.monotonic() - start
            exchange = Exchange("tool", text, call_id=call.id, is_error=is_error)
            c = self.seat.desk.counter
            counts = {"calls": c.calls, "evals": c.evals, "device_s": round(c.device_s, 3)}
            self._keep("tool", exchange.to_dict() | {"tool": call.name, "counts": counts}, seconds=seconds)
            self.exchanges.append(exchange)
            self.active_s += seconds
            if call.name == SUBMIT and not is_error:
                self._end(Ending("submitted", True, _json(text)))
                return  # one submit per session: later calls of this answer are not run

    async def _call(self, call: ToolCall) -> tuple[str, bool]:
        """The tool's answer to one call as text, and whether it is an error."""
        from mcp.server.mcpserver.exceptions import ToolError

        if call.name not in self.names:
            return f"unknown tool {call.name!r}; the tools are: {', '.join(sorted(self.names))}", True
        try:
            arguments = call.parsed()
        except ValueError as exc:
            return f"{call.name}: {exc}; call it again with a JSON object of its arguments", True
        if self.grace and call.name != SUBMIT:
            return "this session's budget is spent: only submit is answered now", True
        try:
            result = await self.seat.server.call_tool(call.name, arguments)
        except ToolError as exc:
            return str(exc), True
        structured = getattr(result, "structured_content", None)
        if structured is not None:
            return json.dumps(structured.get("result", structured)), bool(getattr(result, "is_error", False))
        text = "".join(getattr(part, "text", "") for part in result.content)
        return text, bool(getattr(result, "is_error", False))

    # the transcript ------------------------------------------------------------------------------------

    def _user(self, text: str, kind: str, **extra: str) -> None:
        exchange = Exchange("user", text)
        self._keep("user", exchange.to_dict() | {"kind": kind} | extra)
        self.exchanges.append(exchange)

    def _end(self, ending: Ending) -> None:
        self._keep("end", {"reason": ending.reason, "submitted": ending.submitted, "answer": ending.answer})
        self.ending = ending

    def _keep(
        self, role: str, message: dict[str, Any], tin: int = 0, tout: int = 0, seconds: float = 0.0
    ) -> None:
        seat = self.seat
        step = TranscriptStep(
            seat.problem.key, seat.sample, len(self.steps), role, message, tin, tout, seconds
        )
        seat.store.record_step(seat.run_id, step)
        self.steps.append(step)

    def _restore(self) -> None:
        """The session so far, from its stored transcript: the conversation, its counts and its ending."""
        seat = self.seat
        self.steps = [
            s for s in seat.store.transcript(seat.run_id, seat.problem.key) if s.sample == seat.sample
        ]
        counter = seat.desk.counter
        submitted: dict[str, Any] | None = None
        for s in self.steps:
            self.tokens += s.input_tokens + s.output_tokens
            self.active_s += s.seconds
            if s.role == "end":
                m = s.message
                self.ending = Ending(m["reason"], bool(m["submitted"]), m.get("answer"))
                continue
            self.exchanges.append(Exchange.from_dict(s.message))
            kind = s.message.get("kind")
            self.nudges += kind == "nudge"
            if kind == "grace":
                self.grace = str(s.message.get("why") or "the session's budget")
            self.grace_answered = self.grace_answered or (bool(self.grace) and s.role == "assistant")
            if s.role == "tool":
                counts = s.message.get("counts", {})
                counter.calls, counter.evals = counts.get("calls", 0), counts.get("evals", 0)
                counter.device_s = counts.get("device_s", 0.0)
                if s.message.get("tool") == SUBMIT and not s.message.get("is_error"):
                    submitted = _json(s.message.get("text", "")) or {}
        if submitted is not None and self.ending is None:
            self._end(
                Ending("submitted", True, submitted or None)
            )  # killed between the submit and its ending


def _json(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None
