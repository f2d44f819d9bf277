"""Prompts -> completions -> candidates, resumable; and the multi-turn refinement loop.

`generate` asks every (problem, sample) once and needs no evaluator. `refine` runs `cfg.turns` turns:
after each turn the caller's `evaluate` judges the turn's candidates in one batch (so an executor can
build them in parallel), and every sample's next prompt carries what the evaluator found. Both journal
each answer as it arrives (llm/journal.py), so a killed run, started again with the same output folder,
asks only what is missing.

What the model was told is kept beside its answers, one file per turn, and handed to `on_told` (the
pipeline stores it with the run):

    prompts/level_L_problem_P_sample_S_turn_T.md          the user message of that turn: the task at
                                                          turn 0, the evaluator's feedback after it
    prompts/level_L_problem_P_sample_S_turn_0.system.md   the system prompt (when there is one)
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from kbench.config import RunConfig
from kbench.extract import extract
from kbench.llm.base import GenParams, Message, Request
from kbench.llm.client import LLMClient
from kbench.llm.journal import Attempt, Journal, Key
from kbench.llm.pricing import Usage
from kbench.prompts import PromptOptions, build_prompt, refine_message
from kbench.types import Candidate, Completion, Problem, Prompt, Status, Verdict

Evaluate = Callable[[Sequence[Candidate]], Sequence[Verdict]]
OnAttempt = Callable[[Attempt], None]
# An empty assistant turn is rejected by the Anthropic API; the model sees that it said nothing.
EMPTY_ANSWER = "(empty answer)"


@dataclass
class GenerationResult:
    attempts: list[Attempt] = field(default_factory=list)  # every final attempt, all turns
    failed: list[Attempt] = field(default_factory=list)  # requests that failed; re-run to retry them
    usage: Usage = field(default_factory=Usage)

    @property
    def resumed(self) -> int:
        return sum(a.resumed for a in self.attempts)


@dataclass(frozen=True)
class Chain:
    """One sample's conversation so far."""

    problem: Problem
    prompt: Prompt
    sample: int
    messages: tuple[Message, ...]


@dataclass(frozen=True)
class Told:
    """What one turn of one sample told the model: the system prompt (turn 0) and the user message."""

    problem: Problem
    sample: int
    turn: int
    system: str
    text: str

    @property
    def stem(self) -> str:
        """The generations folder's name for this turn (the journal's, llm/journal.py)."""
        p = self.problem
        return f"level_{p.level}_problem_{p.number}_sample_{self.sample}_turn_{self.turn}"


OnTold = Callable[[Told], None]


def told(chain: Chain, turn: int) -> Told:
    system = chain.prompt.system if turn == 0 else ""
    return Told(chain.problem, chain.sample, turn, system, chain.messages[-1].content)


def keep_told(t: Told, out_dir: Path) -> None:
    """Write what a turn told the model into the generations folder."""
    folder = out_dir / "prompts"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{t.stem}.md").write_text(t.text)
    if t.system:
        (folder / f"{t.stem}.system.md").write_text(t.system)


def gen_params(cfg: RunConfig) -> GenParams:
    return GenParams(
        temperature=cfg.sampling_temperature,
        top_p=cfg.top_p,
        max_tokens=cfg.max_tokens,
        reasoning_effort=cfg.reasoning_effort,
        base_url=cfg.base_url,
        api_key_env=cfg.api_key_env,
        max_retries=cfg.llm_retries,
    )


def make_client(cfg: RunConfig, cache: bool | None = None) -> LLMClient:
    """The client `generate`/`refine` use by default: cfg's model, limit and cache folder (none when
    `cache` is False, or when it is None and cfg.response_cache is off).

    Building it checks the provider's configuration (known provider, API key, replay folder): call it
    before anything is written, so a misconfigured run leaves nothing behind."""
    use_cache = cfg.response_cache if cache is None else cache
    return LLMClient.create(cfg.model, gen_params(cfg), cfg.concurrency, cfg.cache_dir if use_cache else None)


def no_code_verdict(attempt: Attempt, cfg: RunConfig) -> Verdict:
    """The verdict of a sample whose answer held no usable code (status no_code)."""
    return Verdict(
        status=Status.NO_CODE,
        problem_key=attempt.problem_key,
        backend=cfg.backend,
        preset=cfg.preset,
        dtype=cfg.dtype,
        device=cfg.device,
        message=attempt.no_code_reason,
    )


def _key(chain: Chain, turn: int, cfg: RunConfig) -> Key:
    return (chain.problem.key, chain.sample, turn, cfg.backend, cfg.preset, cfg.dtype)


def _to_attempt(
    chain: Chain, turn: int, completion: Completion, final_errors: bool, cfg: RunConfig
) -> Attempt:
    p, backend = chain.problem, cfg.backend
    base = Attempt(
        p.key, p.level, p.number, chain.sample, turn, chain.prompt.digest, completion, None,
        backend=backend, preset=cfg.preset, dtype=cfg.dtype,
    )  # fmt: skip
    if completion.error and not final_errors:
        return replace(base, final=False, no_code_reason=completion.error)
    found = extract(completion.text)
    if found.source is None:
        reason = completion.error or found.reason
        return replace(base, extraction=found.method, no_code_reason=reason)
    origin = completion.model
    candidate = Candidate(p.key, backend, found.source, origin=origin, sample=chain.sample, turn=turn)
    return replace(base, candidate=candidate, extraction=found.method)


async def _ask_turn(
    chains: Sequence[Chain],
    turn: int,
    client: LLMClient,
    journal: Journal,
    done: dict[Key, Attempt],
    cfg: RunConfig,
    on_attempt: OnAttempt | None,
    on_told: OnTold | None = None,
) -> list[Attempt]:
    async def one(chain: Chain) -> Attempt:
        key = _key(chain, turn, cfg)
        said = told(chain, turn)
        keep_told(said, journal.out_dir)
        if on_told is not None:
            on_told(said)
        if key in done:
            attempt = done[key]
        else:
            request = Request(
                model=cfg.model,
                system=chain.prompt.system,
                messages=chain.messages,
                params=gen_params(cfg),
                problem_key=chain.problem.key,
                level=chain.problem.level,
                number=chain.problem.number,
                sample=chain.sample,
                turn=turn,
            )
            completion = await client.complete(request)
            attempt = _to_attempt(chain, turn, completion, client.errors_are_final, cfg)
            journal.append(attempt)
        if on_attempt is not None:
            on_attempt(attempt)
        return attempt

    return list(await asyncio.gather(*(one(c) for c in chains)))


def first_chains(problems: Sequence[Problem], cfg: RunConfig) -> list[Chain]:
    options = PromptOptions.from_config(cfg)
    chains = []
    for problem in problems:
        prompt = build_prompt(problem, options)
        first = (Message("user", prompt.text),)
        chains += [Chain(problem, prompt, s, first) for s in range(cfg.samples)]
    return chains


async def generate_async(
    problems: Sequence[Problem],
    cfg: RunConfig,
    out_dir: Path,
    client: LLMClient | None = None,
    on_attempt: OnAttempt | None = None,
) -> GenerationResult:
    client = client or make_client(cfg)
    journal = Journal(out_dir)
    try:
        attempts = await _ask_turn(
            first_chains(problems, cfg), 0, client, journal, journal.load(), cfg, on_attempt
        )
    finally:
        await client.aclose()
    return GenerationResult(
        attempts=[a for a in attempts if a.final],
        failed=[a for a in attempts if not a.final],
        usage=client.usage,
    )


def generate(
    problems: Sequence[Problem],
    cfg: RunConfig,
    out_dir: Path,
    client: LLMClient | None = None,
    on_attempt: OnAttempt | None = None,
) -> GenerationResult:
    """Turn 0 for every (problem, sample): no evaluator. The client is closed at the end."""
    return asyncio.run(generate_async(problems, cfg, out_dir, client, on_attempt))


def _judge(attempts: list[Attempt], evaluate: Evaluate, cfg: RunConfig) -> list[Attempt]:
    with_code = [a for a in attempts if a.candidate is not None]
    verdicts = list(evaluate([a.candidate for a in with_code if a.candidate is not None]))
    if len(verdicts) != len(with_code):
        raise ValueError(f"evaluate returned {len(verdicts)} verdicts for {len(with_code)} candidates")
    by_key = {a.key: v for a, v in zip(with_code, verdicts, strict=True)}
    return [replace(a, verdict=by_key.get(a.key) or no_code_verdict(a, cfg)) for a in attempts]


def _next_chain(chain: Chain, attempt: Attempt, backend: str) -> Chain:
    said = Message("assistant", attempt.completion.text or EMPTY_ANSWER)
    verdict = attempt.verdict if attempt.candidate is not None else None
    source = attempt.candidate.source if attempt.candidate is not None else ""
    reply = Message("user", refine_message(backend, verdict, attempt.no_code_reason, source))
    return replace(chain, messages=(*chain.messages, said, reply))


async def refine_async(
    problems: Sequence[Problem],
    cfg: RunConfig,
    evaluate: Evaluate,
    out_dir: Path,
    client: LLMClient | None = None,
    on_attempt: OnAttempt | None = None,
    on_verdict: OnAttempt | None = None,
    on_told: OnTold | None = None,
) -> GenerationResult:
    client = client or make_client(cfg)
    journal = Journal(out_dir)
    done = journal.load()
    result = GenerationResult(usage=client.usage)
    chains = first_chains(problems, cfg)
    try:
        for turn in range(cfg.turns):
            asked = await _ask_turn(chains, turn, client, journal, done, cfg, on_attempt, on_told)
            result.failed += [a for a in asked if not a.final]
            judged = await asyncio.to_thread(_judge, [a for a in asked if a.final], evaluate, cfg)
            for attempt in judged:
                if on_verdict is not None:
                    on_verdict(attempt)
            result.attempts += judged
            by_key = {(a.problem_key, a.sample): a for a in judged}
            chains = [
                _next_chain(c, by_key[(c.problem.key, c.sample)], cfg.backend)
                for c in chains
                if (c.problem.key, c.sample) in by_key
            ]
    finally:
        await client.aclose()
    return result


def refine(
    problems: Sequence[Problem],
    cfg: RunConfig,
    evaluate: Evaluate,
    out_dir: Path,
    client: LLMClient | None = None,
    on_attempt: OnAttempt | None = None,
    on_verdict: OnAttempt | None = None,
    on_told: OnTold | None = None,
) -> GenerationResult:
    """`cfg.turns` turns of generate -> evaluate -> feed back, for every (problem, sample).

    `evaluate` gets one turn's candidates and returns one verdict each, in order. Answers without code
    get a `no_code` verdict here, without calling `evaluate`. `on_verdict` sees every judged attempt
    (store it there); `on_told` what every turn told the model, before it is asked (or read back from
    the journal); a sample whose request failed stops and is listed in `failed`.
    """
    return asyncio.run(
        refine_async(problems, cfg, evaluate, out_dir, client, on_attempt, on_verdict, on_told)
    )
