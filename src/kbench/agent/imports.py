"""`kbench import-agent FOLDER`: agent runs made outside kbench, judged and filed like kbench's own.

A folder holds each session's final answer and, beside it, its transcript:

    level_2_problem_17_sample_0.py        the submitted kernel (a Python file; .md/.txt: the answer's
                                          text, its code extracted as a model's completion is)
    level_2_problem_17_sample_0.jsonl     the transcript: one message per line (or .json: a list, or an
                                          object with `messages`), optional

A message is `{"role": ..., "content": ...}` in OpenAI's chat shape (`tool_calls`, role `tool` with
`tool_call_id`) or Anthropic's (content blocks `text`, `tool_use`, `tool_result`); `usage` with input and
output (or prompt and completion) tokens is counted where given. Every answer is judged by the trusted
evaluator under the whole protocol into one run, filed under the model name given, with its transcript
stored as kbench's own sessions' are, so `kbench report RUN` shows them side by side.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kbench.config import RunConfig
from kbench.errors import ConfigError
from kbench.llm.tooluse import Exchange, ToolCall
from kbench.store import TranscriptStep, VerdictKey
from kbench.types import Status, Verdict

Step = tuple[str, dict[str, Any], int, int]  # role, message, input tokens, output tokens


@dataclass(frozen=True)
class Imported:
    level: int
    number: int
    sample: int
    answer: Path  # the final answer's file
    transcript: Path | None


def find_sessions(folder: Path) -> list[Imported]:
    """The folder's sessions, by (level, problem, sample): each answer file and its transcript, if any."""
    from kbench.llm.replay import index_folder

    if not folder.is_dir():
        raise ConfigError(f"import-agent: {folder} is not a folder")
    found = []
    for (level, number, sample, turn), path in sorted(index_folder(folder).items()):
        if turn:
            continue  # a multi-turn run's later turns are no agent's final answer
        stem = f"level_{level}_problem_{number}_sample_{sample}"
        beside = [path.parent / f"{stem}{suffix}" for suffix in (".jsonl", ".json")]
        found.append(Imported(level, number, sample, path, next((p for p in beside if p.is_file()), None)))
    if not found:
        raise ConfigError(
            f"import-agent: no answers in {folder}: name them level_L_problem_P_sample_S.py (.md, .txt), "
            "with the transcript beside as level_L_problem_P_sample_S.jsonl"
        )
    return found


def read_messages(path: Path) -> list[dict[str, Any]]:
    """A transcript file's messages; ConfigError naming the file and line of what cannot be read."""
    text = path.read_text(errors="replace")
    try:
        if path.suffix == ".jsonl":
            messages = [json.loads(line) for line in text.splitlines() if line.strip()]
        else:
            loaded = json.loads(text)
            messages = loaded.get("messages", []) if isinstance(loaded, dict) else loaded
    except json.JSONDecodeError as exc:
        raise ConfigError(f"import-agent: {path.name}: not JSON at line {exc.lineno}: {exc.msg}") from None
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise ConfigError(f"import-agent: {path.name}: the transcript must be a list of message objects")
    return messages


def steps_of(messages: list[dict[str, Any]]) -> list[Step]:
    """kbench's transcript steps of a transcript in either API's shape (tool names found by call id)."""
    names: dict[str, str] = {}
    steps: list[Step] = []
    for m in messages:
        for role, exchange, extra in _exchanges(m):
            for call in exchange.calls:
                names[call.id] = call.name
            message = exchange.to_dict() | extra
            if role == "tool":
                message["tool"] = names.get(exchange.call_id, "")
            tin, tout = _usage(m) if role == "assistant" else (0, 0)
            steps.append((role, message, tin, tout))
    return steps


def _exchanges(m: dict[str, Any]) -> Iterator[tuple[str, Exchange, dict[str, Any]]]:
    role, content = str(m.get("role", "user")), m.get("content")
    blocks = content if isinstance(content, list) else []
    text = (
        content
        if isinstance(content, str)
        else "".join(
            str(b.get("text", "")) for b in blocks if isinstance(b, dict) and b.get("type") == "text"
        )
    )
    if role == "tool":
        yield "tool", Exchange("tool", text, call_id=str(m.get("tool_call_id", ""))), {}
        return
    for b in blocks:  # Anthropic: a user message carries the results of the answer before it
        if isinstance(b, dict) and b.get("type") == "tool_result":
            result = b.get("content")
            shown = result if isinstance(result, str) else json.dumps(result)
            yield (
                "tool",
                Exchange(
                    "tool", shown, call_id=str(b.get("tool_use_id", "")), is_error=bool(b.get("is_error"))
                ),
                {},
            )
    if role == "assistant":
        calls = [
            ToolCall(
                str(c.get("id", "")),
                str(c.get("function", {}).get("name", "")),
                _arguments(c.get("function", {}).get("arguments")),
            )
            for c in m.get("tool_calls") or []
            if isinstance(c, dict)
        ]
        calls += [
            ToolCall(str(b.get("id", "")), str(b.get("name", "")), _arguments(b.get("input")))
            for b in blocks
            if isinstance(b, dict) and b.get("type") == "tool_use"
        ]
        yield "assistant", Exchange("assistant", text, tuple(calls)), {}
    elif text or not blocks:
        yield "user", Exchange("user", text), {"kind": "task" if role == "user" else role}


def _arguments(given: Any) -> str:
    return given if isinstance(given, str) else json.dumps(given if given is not None else {})


def _usage(m: dict[str, Any]) -> tuple[int, int]:
    u = m.get("usage") or {}
    if not isinstance(u, dict):
        return 0, 0
    return int(u.get("input_tokens", u.get("prompt_tokens", 0)) or 0), int(
        u.get("output_tokens", u.get("completion_tokens", 0)) or 0
    )


def import_sessions(cfg: RunConfig, folder: Path, model: str) -> tuple[str, int]:
    """Judge every answer in `folder` into one run (cfg.run_id: continue that one) under `model`, with
    its transcript; (run id, verdicts filed). Answers already judged in that run are kept, not judged again."""
    from kbench.api import Evaluator, EvaluatorOptions, Submission
    from kbench.extract import extract
    from kbench.problems import get_problem
    from kbench.store import Store

    sessions = find_sessions(folder)
    transcripts = {s: steps_of(read_messages(s.transcript)) if s.transcript else [] for s in sessions}
    problems = {s: get_problem(f"{s.level}/{s.number}", cfg.source) for s in sessions}
    with Evaluator(cfg, EvaluatorOptions(sources_only=False)) as ev:
        run_id = ev.run_id
        assert run_id is not None  # a recording Evaluator has a run
        tickets, filed = [], 0
        with Store(cfg.store) as store:
            store.put_problems(problems.values())
            store.put_run_problems(run_id, sorted({p.key for p in problems.values()}))
            for s in sessions:
                p, text = problems[s], s.answer.read_text(errors="replace")
                found = extract(text)
                source = text if s.answer.suffix == ".py" else found.source
                steps = transcripts[s] + [("end", {"reason": "imported", "submitted": bool(source)}, 0, 0)]
                for i, (role, message, tin, tout) in enumerate(steps):
                    store.record_step(run_id, TranscriptStep(p.key, s.sample, i, role, message, tin, tout))
                if source:
                    tickets.append(
                        ev.submit(Submission(p, source, sample=s.sample, model=model, completion=text))
                    )
                    continue
                key = VerdictKey(p.key, s.sample, 0, cfg.backend, model)
                filed += store.record(run_id, key, _no_code(cfg, p.key, found.reason), "", text)
        for ticket in tickets:
            ticket.verdict()
    return run_id, filed + len(tickets)


def _no_code(cfg: RunConfig, problem_key: str, reason: str) -> Verdict:
    return Verdict(
        status=Status.NO_CODE, problem_key=problem_key, backend=cfg.backend, preset=cfg.preset,
        dtype=cfg.dtype, device=cfg.device, message=f"the imported answer holds no code: {reason}",
    )  # fmt: skip
