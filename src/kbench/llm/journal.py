"""The generation journal: one JSON line per finished (problem, sample, turn), appended as answers arrive.

A killed run loses at most the requests in flight: on restart every line already written is a finished
key and is not asked again. The key is (problem, sample, turn, backend, preset, dtype): the prompt names
the backend, the preset's sizes and the dtype, so an answer to another setting is never taken for this one
(lines written before these were part of the key match nothing and are asked again). A truncated last line (killed mid-write) is ignored. Errors the provider may
recover from (timeouts, 5xx after all retries) are written with `final: false` and asked again.
Next to the journal, each answer is also kept as files:

    completions/level_L_problem_P_sample_S_turn_T.md    the model's raw answer
    candidates/level_L_problem_P_sample_S_turn_T.py     the extracted source (when there is one)
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kbench.types import Candidate, Completion, Verdict

Key = tuple[str, int, int, str, str, str]  # problem key, sample, turn, backend, preset, dtype


@dataclass(frozen=True)
class Attempt:
    """One turn of one sample: what was asked, what came back, the candidate, and (later) its verdict."""

    problem_key: str
    level: int
    number: int
    sample: int
    turn: int
    prompt_digest: str
    completion: Completion
    candidate: Candidate | None
    extraction: str = ""  # how the source was found: fenced-python | fenced-other | unfenced | none
    no_code_reason: str = ""
    final: bool = True  # False: the request failed in a way asking again may fix
    resumed: bool = False  # read back from the journal, not asked in this run
    verdict: Verdict | None = None
    backend: str = ""
    preset: str = ""
    dtype: str = ""

    @property
    def key(self) -> Key:
        return (self.problem_key, self.sample, self.turn, self.backend, self.preset, self.dtype)

    @property
    def stem(self) -> str:
        return f"level_{self.level}_problem_{self.number}_sample_{self.sample}_turn_{self.turn}"


class Journal:
    def __init__(self, out_dir: Path) -> None:
        self.out_dir = Path(out_dir)
        self.path = self.out_dir / "journal.jsonl"

    def load(self) -> dict[Key, Attempt]:
        """Finished attempts by key; later lines win, so a retried key takes its newest answer."""
        done: dict[Key, Attempt] = {}
        if not self.path.exists():
            return done
        for line in self.path.read_text().splitlines():
            try:
                attempt = _from_record(json.loads(line))
            except (json.JSONDecodeError, KeyError, TypeError):
                continue  # the line a kill cut short
            if attempt.final:
                done[attempt.key] = attempt
        return done

    def append(self, attempt: Attempt) -> None:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        if attempt.final:
            _write(self.out_dir / "completions" / f"{attempt.stem}.md", attempt.completion.text)
            if attempt.candidate is not None:
                _write(self.out_dir / "candidates" / f"{attempt.stem}.py", attempt.candidate.source)
        with self.path.open("a") as fh:
            fh.write(json.dumps(_to_record(attempt)) + "\n")
            fh.flush()


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _to_record(a: Attempt) -> dict[str, Any]:
    return {
        "problem_key": a.problem_key,
        "level": a.level,
        "number": a.number,
        "sample": a.sample,
        "turn": a.turn,
        "prompt_digest": a.prompt_digest,
        "completion": asdict(a.completion),
        "candidate": None if a.candidate is None else asdict(a.candidate),
        "extraction": a.extraction,
        "no_code_reason": a.no_code_reason,
        "final": a.final,
        "backend": a.backend,
        "preset": a.preset,
        "dtype": a.dtype,
    }


def _from_record(r: dict[str, Any]) -> Attempt:
    return Attempt(
        problem_key=r["problem_key"],
        level=r["level"],
        number=r["number"],
        sample=r["sample"],
        turn=r["turn"],
        prompt_digest=r["prompt_digest"],
        completion=Completion(**r["completion"]),
        candidate=None if r["candidate"] is None else Candidate(**r["candidate"]),
        extraction=r["extraction"],
        no_code_reason=r["no_code_reason"],
        final=r["final"],
        resumed=True,
        backend=r.get("backend", ""),
        preset=r.get("preset", ""),
        dtype=r.get("dtype", ""),
    )
