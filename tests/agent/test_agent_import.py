"""`kbench import-agent`: an outside agent's answers and transcripts (OpenAI's and Anthropic's message
shapes), judged under the whole protocol into one run with their transcripts; bad transcripts refused
with the file and line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from evalfixtures import cpu_config_file, fixture_source, use_builds

from kbench.agent.imports import read_messages, steps_of
from kbench.errors import ConfigError
from kbench.store import Store

KBENCH = str(Path(sys.executable).with_name("kbench"))
OPENAI = [
    {"role": "system", "content": "you write kernels"},
    {"role": "user", "content": "problem 2/1"},
    {"role": "assistant", "content": None, "usage": {"prompt_tokens": 100, "completion_tokens": 20},
     "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "evaluate", "arguments": "{\"s\": 1}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "{\"status\": \"ok\"}"},
    {"role": "assistant", "content": "done"},
]  # fmt: skip
ANTHROPIC = {
    "messages": [
        {"role": "user", "content": "problem 2/1"},
        {"role": "assistant", "usage": {"input_tokens": 50, "output_tokens": 5}, "content": [
            {"type": "text", "text": "trying"}, {"type": "tool_use", "id": "t1", "name": "check", "input": {"a": 1}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "built", "is_error": True}]},
    ]
}  # fmt: skip


def test_both_message_shapes_become_transcript_steps(tmp_path: Path) -> None:
    openai = steps_of(OPENAI)
    assert [s[0] for s in openai] == ["user", "user", "assistant", "tool", "assistant"]
    assert openai[0][1]["kind"] == "system" and openai[2][1]["calls"][0]["name"] == "evaluate"
    assert openai[2][2:] == (100, 20) and openai[3][1]["tool"] == "evaluate" and not openai[3][1]["is_error"]
    path = tmp_path / "t.json"
    path.write_text(json.dumps(ANTHROPIC))
    anthropic = steps_of(read_messages(path))
    assert [s[0] for s in anthropic] == ["user", "assistant", "tool"]
    assert anthropic[1][1]["calls"] == [{"id": "t1", "name": "check", "arguments": '{"a": 1}'}]
    assert anthropic[2][1] | {} == {
        "role": "tool",
        "text": "built",
        "call_id": "t1",
        "is_error": True,
        "tool": "check",
    }
    bad = tmp_path / "b.jsonl"
    bad.write_text('{"role": "user", "content": "x"}\n{"role": \n')
    with pytest.raises(ConfigError, match="b.jsonl: not JSON at line 1"):
        read_messages(bad)


@pytest.mark.slow
def test_an_outside_agents_answers_are_judged_with_their_transcripts(
    tmp_path: Path, shared_builds: Path
) -> None:
    answers = tmp_path / "answers"
    answers.mkdir()
    (answers / "level_2_problem_1_sample_0.py").write_text(fixture_source("cpp_honest.py"))
    (answers / "level_2_problem_1_sample_0.jsonl").write_text("\n".join(json.dumps(m) for m in OPENAI))
    (answers / "level_2_problem_1_sample_1.md").write_text("I could not finish a kernel.")
    (answers / "level_2_problem_1_sample_2.py").write_text(fixture_source("cpp_wrong.py"))
    (answers / "level_2_problem_1_sample_2.json").write_text(json.dumps(ANTHROPIC))
    config = cpu_config_file(tmp_path, static_checks=True)
    env = dict(os.environ) | {"KBENCH_CACHE_DIR": str(use_builds(tmp_path / "cache", shared_builds))}
    done = subprocess.run(
        [KBENCH, "import-agent", str(answers), "-m", "outside-agent", "--config", str(config), "--store",
         str(tmp_path / "k.db")], capture_output=True, text=True, timeout=600, env=env | {"COLUMNS": "200"},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "3 answers of outside-agent judged" in done.stdout
    with Store(tmp_path / "k.db") as store:
        (run,) = store.runs()
        verdicts = {k.sample: (k.model, v.status.value) for k, v in store.verdicts(run.run_id)}
        steps = store.transcript(run.run_id)
    assert verdicts == {
        0: ("outside-agent", "ok"),
        1: ("outside-agent", "no_code"),
        2: ("outside-agent", "mismatch"),
    }
    by_sample = {s: [t.role for t in steps if t.sample == s] for s in (0, 1, 2)}
    assert by_sample == {0: ["user", "user", "assistant", "tool", "assistant", "end"], 1: ["end"],
                         2: ["user", "assistant", "tool", "end"]}  # fmt: skip
    html = (tmp_path / f"{run.run_id}.html").read_text()
    assert "Agent sessions" in html and "agent transcript: 6 steps, 1 tool call, 120 tokens" in html
