"""generate/refine end to end against the local OpenAI-format server, with a fake evaluator."""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from llmserver import load_server_module

from kbench.config import RunConfig
from kbench.generate import Told, generate, make_client, refine
from kbench.llm.journal import Journal
from kbench.problems import get_problem
from kbench.types import Candidate, Status, Verdict

LLMServer = load_server_module().LLMServer
PROBLEM = get_problem("2/1")


def _respond(req) -> str:  # type: ignore[no-untyped-def]
    turn = sum(m["role"] == "assistant" for m in req.messages)
    return f"Here it is.\n```python\nimport torch\n\nclass ModelNew:\n    turn = {turn}\n```\n"


def _cfg(tmp_path: Path, url: str, **kw: object) -> RunConfig:
    base = {"model": "openai/test", "base_url": url, "backend": "cpp", "cache_dir": tmp_path / "cache"}
    return RunConfig(**(base | kw))  # type: ignore[arg-type]


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test")


def test_generate_writes_files_and_journal(tmp_path: Path) -> None:
    with LLMServer(respond=_respond) as server:
        cfg = _cfg(tmp_path, server.openai_url, samples=3, concurrency=2)
        result = generate([PROBLEM], cfg, tmp_path / "out")
        assert server.stats.requests == 3 and server.stats.max_in_flight <= 2
    assert len(result.attempts) == 3 and not result.failed
    assert all(a.candidate is not None and "class ModelNew" in a.candidate.source for a in result.attempts)
    files = sorted(p.name for p in (tmp_path / "out" / "candidates").iterdir())
    assert files == [f"level_2_problem_1_sample_{s}_turn_0.py" for s in range(3)]
    assert len(Journal(tmp_path / "out").load()) == 3
    assert result.usage.requests == 3 and result.usage.input_tokens > 0


def test_generate_resumes_from_journal_without_asking(tmp_path: Path) -> None:
    with LLMServer(respond=_respond) as server:
        cfg = _cfg(tmp_path, server.openai_url, samples=2)
        generate([PROBLEM], cfg, tmp_path / "out")
        cfg4 = _cfg(tmp_path, server.openai_url, samples=4)
        # no cache: only the journal can keep the first two samples from being asked again
        again = generate([PROBLEM], cfg4, tmp_path / "out", client=make_client(cfg4, cache=False))
        assert server.stats.requests == 4
    assert again.resumed == 2 and len(again.attempts) == 4


def test_cache_answers_a_new_output_folder(tmp_path: Path) -> None:
    with LLMServer(respond=_respond) as server:
        cfg = _cfg(tmp_path, server.openai_url, samples=2)
        generate([PROBLEM], cfg, tmp_path / "a")
        second = generate([PROBLEM], cfg, tmp_path / "b")
        assert server.stats.requests == 2
    assert second.usage.cached == 2 and all(a.completion.cached for a in second.attempts)


def _numbered() -> Callable[[object], str]:
    """An answer that differs on every request, as a sampling server's would."""
    count = itertools.count()
    return lambda req: f"```python\nimport torch\n\nclass ModelNew:\n    answer = {next(count)}\n```\n"


def test_samples_are_never_one_cached_answer(tmp_path: Path) -> None:
    with LLMServer(respond=_numbered()) as server:
        cfg = _cfg(tmp_path, server.openai_url, samples=4)
        first = generate([PROBLEM], cfg, tmp_path / "a")
        assert server.stats.requests == 4 and len(server.stats.answered) == 1  # one prompt, asked 4 times
        temperatures = {r.body["temperature"] for r in server.stats.seen}
        again = generate([PROBLEM], cfg, tmp_path / "b")  # a new folder: only the cache can answer
        assert server.stats.requests == 4
    sources = {a.sample: a.candidate.source for a in first.attempts if a.candidate is not None}
    assert len(set(sources.values())) == 4  # four samples, four answers
    assert temperatures == {0.7}  # several samples and no temperature given: the sampling default
    assert again.usage.cached == 4 and again.usage.requests == 0
    assert {a.sample: a.candidate.source for a in again.attempts if a.candidate is not None} == sources


def test_no_cache_asks_again(tmp_path: Path) -> None:
    with LLMServer(respond=_numbered()) as server:
        cfg = _cfg(tmp_path, server.openai_url, samples=2)
        generate([PROBLEM], cfg, tmp_path / "a")
        off = cfg.model_copy(update={"response_cache": False})
        again = generate([PROBLEM], off, tmp_path / "b")
        assert server.stats.requests == 4
    assert again.usage.cached == 0 and again.usage.requests == 2


def test_journal_key_holds_backend_preset_and_dtype(tmp_path: Path) -> None:
    with LLMServer(respond=_respond) as server:
        cfg = _cfg(tmp_path, server.openai_url, preset="small")
        generate([PROBLEM], cfg, tmp_path / "out", client=make_client(cfg, cache=False))
        [key] = Journal(tmp_path / "out").load()
        assert key == (PROBLEM.key, 0, 0, "cpp", "small", "fp32")
        for change in ({"preset": "full"}, {"dtype": "fp16"}, {"backend": "triton"}):
            other = cfg.model_copy(update=change)
            generate([PROBLEM], other, tmp_path / "out", client=make_client(other, cache=False))
        assert server.stats.requests == 4  # an answer for other settings is never taken for these
        generate([PROBLEM], cfg, tmp_path / "out", client=make_client(cfg, cache=False))
        assert server.stats.requests == 4


def test_failed_requests_are_retried_on_rerun(tmp_path: Path) -> None:
    with LLMServer(respond=_respond, p500=1.0) as server:
        cfg = _cfg(tmp_path, server.openai_url)
        client = make_client(cfg)
        client.provider.client = client.provider.client.with_options(max_retries=0)
        failed = generate([PROBLEM], cfg, tmp_path / "out", client=client)
        server.p500 = 0.0
        ok = generate([PROBLEM], cfg, tmp_path / "out")
    assert len(failed.failed) == 1 and not failed.attempts
    assert len(ok.attempts) == 1 and ok.attempts[0].candidate is not None


class FakeEvaluator:
    """Mismatch on turn 0, ok afterwards; records what it was asked."""

    def __init__(self) -> None:
        self.batches: list[list[Candidate]] = []

    def __call__(self, candidates: Sequence[Candidate]) -> list[Verdict]:
        self.batches.append(list(candidates))
        out = []
        for c in candidates:
            status = Status.MISMATCH if c.turn == 0 else Status.OK
            out.append(
                Verdict(
                    status, c.problem_key, "cpp", "small", "fp32", "cpu", message=f"MARK-{c.sample}-{c.turn}"
                )
            )
        return out


def test_refine_feeds_verdicts_back(tmp_path: Path) -> None:
    evaluator = FakeEvaluator()
    stored: list[tuple[int, int, str]] = []
    with LLMServer(respond=_respond) as server:
        cfg = _cfg(tmp_path, server.openai_url, samples=2, turns=3)
        result = refine(
            [PROBLEM],
            cfg,
            evaluator,
            tmp_path / "out",
            on_verdict=lambda a: stored.append((a.sample, a.turn, a.verdict.status.value)),
        )
        turn2 = [r for r in server.stats.seen if sum(m["role"] == "assistant" for m in r.messages) == 2]
    assert [len(b) for b in evaluator.batches] == [2, 2, 2]
    assert sorted(stored) == sorted(
        (s, t, "mismatch" if t == 0 else "ok") for s in range(2) for t in range(3)
    )
    assert len(turn2) == 2
    history = turn2[0].messages
    sample = int(re.search(r"MARK-(\d)-0", history[1 + 1]["content"]).group(1))  # the turn-0 feedback
    assert "mismatch" in history[2]["content"] and f"MARK-{sample}-1" in history[4]["content"]
    assert "class ModelNew" in history[1]["content"]  # the model sees its own previous answer
    assert len(result.attempts) == 6 and all(a.verdict is not None for a in result.attempts)


def test_every_turn_keeps_what_it_told_the_model(tmp_path: Path) -> None:
    """The task at turn 0 and the feedback at every later turn: handed to on_told and written into the
    generations folder, exactly as sent (the server saw the same text), again on a resume."""
    told: list[Told] = []
    out = tmp_path / "out"
    with LLMServer(respond=_respond) as server:
        cfg = _cfg(tmp_path, server.openai_url, samples=2, turns=2)
        refine([PROBLEM], cfg, FakeEvaluator(), out, on_told=told.append)
        sent = {(sum(m["role"] == "assistant" for m in r.messages), r.last_user) for r in server.stats.seen}
    assert sorted((t.sample, t.turn) for t in told) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert {(t.turn, t.text) for t in told} == sent
    feedback = next(t for t in told if t.turn == 1 and t.sample == 0)
    assert "Result of your previous answer: mismatch" in feedback.text and not feedback.system
    first = next(t for t in told if t.turn == 0)
    assert first.system and "class Model(" in first.text
    prompts = out / "prompts"
    assert (prompts / "level_2_problem_1_sample_0_turn_1.md").read_text() == feedback.text
    assert (prompts / "level_2_problem_1_sample_1_turn_0.system.md").read_text() == first.system
    assert sorted(p.name for p in prompts.iterdir() if not p.name.endswith(".system.md")) == [
        f"level_2_problem_1_sample_{s}_turn_{t}.md" for s in range(2) for t in range(2)
    ]
    again: list[Told] = []
    refine([PROBLEM], cfg, FakeEvaluator(), out, on_told=again.append)  # every answer is in the journal
    assert sorted(again, key=lambda t: (t.sample, t.turn)) == sorted(told, key=lambda t: (t.sample, t.turn))


def test_refine_no_code_gets_verdict_without_evaluator(tmp_path: Path) -> None:
    evaluator = FakeEvaluator()
    with LLMServer(respond=lambda req: "I cannot do that.") as server:
        cfg = _cfg(tmp_path, server.openai_url, turns=2)
        result = refine([PROBLEM], cfg, evaluator, tmp_path / "out")
        second = server.stats.seen[-1].messages[-1]["content"]
    assert evaluator.batches == [[], []]
    assert [a.verdict.status for a in result.attempts] == [Status.NO_CODE, Status.NO_CODE]
    assert "no code block" in result.attempts[0].verdict.message
    assert "No usable code" in second


def test_refine_resume_asks_only_missing_turns(tmp_path: Path) -> None:
    with LLMServer(respond=_respond) as server:
        cfg1 = _cfg(tmp_path, server.openai_url, turns=1)
        refine([PROBLEM], cfg1, FakeEvaluator(), tmp_path / "out", client=make_client(cfg1, cache=False))
        cfg2 = _cfg(tmp_path, server.openai_url, turns=2)
        result = refine(
            [PROBLEM], cfg2, FakeEvaluator(), tmp_path / "out", client=make_client(cfg2, cache=False)
        )
        assert server.stats.requests == 2
    assert [a.resumed for a in result.attempts] == [True, False]


def test_replay_of_a_kernelbench_folder_rejudges_old_kernels(tmp_path: Path) -> None:
    runs = tmp_path / "kb_run"
    runs.mkdir()
    (runs / "level_2_problem_1_sample_0_kernel.py").write_text(
        "import torch\n\nclass ModelNew:\n    old = 1\n"
    )
    cfg = RunConfig(model=f"replay/{runs}", backend="cpp", samples=2, cache_dir=tmp_path / "cache")
    evaluator = FakeEvaluator()
    result = refine([PROBLEM], cfg, evaluator, tmp_path / "out")
    by_sample = {a.sample: a for a in result.attempts}
    assert by_sample[0].candidate is not None and "old = 1" in by_sample[0].candidate.source
    assert by_sample[0].extraction == "unfenced" and by_sample[0].verdict.status is Status.MISMATCH
    assert by_sample[1].verdict.status is Status.NO_CODE and "sample 1" in by_sample[1].verdict.message
    assert not result.failed and [len(b) for b in evaluator.batches] == [1]
