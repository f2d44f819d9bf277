"""Agent runs in the report: each session's transcript beside its verdict, and what the sessions cost.

A transcript (store TranscriptStep) is the whole session in order: the task, each answer of the model
(its text, its tool calls with their arguments, its tokens), each tool's result (an error marked) and
how the session ended. The agents table gives, per series: sessions, submitted, solved (verdict ok),
and tool calls and tokens per session and per solved problem.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from kbench.store import TranscriptStep

SessionKey = tuple[str, int]  # problem, sample


def sessions(steps: Sequence[TranscriptStep]) -> dict[SessionKey, list[TranscriptStep]]:
    out: dict[SessionKey, list[TranscriptStep]] = {}
    for t in steps:
        out.setdefault((t.problem_key, t.sample), []).append(t)
    return out


@dataclass(frozen=True)
class Effort:
    sessions: int
    submitted: int
    calls: int
    tokens: int

    @classmethod
    def of(cls, steps: Sequence[TranscriptStep]) -> Effort:
        by = sessions(steps)
        ends = [t for t in steps if t.role == "end"]
        return cls(
            len(by),
            sum(bool(t.message.get("submitted")) for t in ends),
            sum(t.role == "tool" for t in steps),
            sum(t.input_tokens + t.output_tokens for t in steps),
        )


def _per(total: int, count: int) -> str:
    return "–" if not count else f"{total / count:,.1f}"


def agents_table(rows: Sequence[tuple[str, Sequence[TranscriptStep], int]]) -> str:
    """(series label, its transcript, its problems solved) each: the agents' effort, as an HTML table."""
    body = []
    for label, steps, solved in rows:
        e = Effort.of(steps)
        cells = [
            escape(label), str(e.sessions), str(e.submitted), str(solved), f"{e.calls:,}",
            _per(e.calls, e.sessions), _per(e.calls, solved), f"{e.tokens:,}", _per(e.tokens, solved),
        ]  # fmt: skip
        body.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    head = ["series", "sessions", "submitted", "solved (ok)", "tool calls", "calls / session",
            "calls / solved", "tokens", "tokens / solved"]  # fmt: skip
    return (
        "<h2 id='agents'>Agent sessions</h2><p class='note'>solved: the problems whose submitted kernel's "
        "final verdict is ok; tokens: input + output of every answer</p><table><tr>"
        + "".join(f"<th>{h}</th>" for h in head)
        + "</tr>"
        + "".join(body)
        + "</table>"
    )


def effort_line(label: str, steps: Sequence[TranscriptStep], solved: int) -> str:
    """The agents table's row as one line (the terminal summary)."""
    e = Effort.of(steps)
    return (
        f"{label}: agent sessions {e.sessions}, submitted {e.submitted}, solved {solved}; tool calls "
        f"{e.calls:,} ({_per(e.calls, e.sessions)} a session, {_per(e.calls, solved)} a solved problem), "
        f"tokens {e.tokens:,} ({_per(e.tokens, solved)} a solved problem)"
    )


def _step(t: TranscriptStep) -> str:
    m = t.message
    if t.role == "end":
        return f"<li><b>ended</b>: {escape(str(m.get('reason', '')))}</li>"
    if t.role == "assistant":
        head = f"<b>model</b> ({t.input_tokens:,} + {t.output_tokens:,} tokens, {t.seconds:.1f} s)"
        calls = "".join(
            f"<div>→ <code>{escape(c['name'])}</code><pre>{escape(c['arguments'])}</pre></div>"
            for c in m.get("calls", [])
        )
        text = f"<pre>{escape(m.get('text', ''))}</pre>" if m.get("text") else ""
        return f"<li>{head}{text}{calls}</li>"
    if t.role == "tool":
        mark = ' <span class="bad">error</span>' if m.get("is_error") else ""
        head = f"<b>tool {escape(str(m.get('tool', '')))}</b> ({t.seconds:.1f} s){mark}"
        return f"<li>{head}<pre>{escape(m.get('text', ''))}</pre></li>"
    kind = escape(str(m.get("kind", "message")))
    return f"<li><b>user</b> ({kind})<pre>{escape(m.get('text', ''))}</pre></li>"


def transcript_block(steps: Sequence[TranscriptStep]) -> str:
    """One session's transcript, collapsed: its steps in order."""
    if not steps:
        return ""
    e = Effort.of(steps)
    summary = f"agent transcript: {len(steps)} steps, {e.calls} tool call{'' if e.calls == 1 else 's'}, {e.tokens:,} tokens"
    return (
        f"<details><summary>{escape(summary)}</summary><ol>{''.join(_step(t) for t in steps)}</ol></details>"
    )
