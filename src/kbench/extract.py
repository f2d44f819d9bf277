"""Completion -> candidate source: the code a model meant as its answer, or a reason why there is none.

Order of preference: the last fenced python block that defines `class ModelNew` (models often sketch
first and answer last); then the last fenced block of any language with `ModelNew`; then unfenced
source with `ModelNew` (replayed kernel files, models that ignore the format). Reasoning inside
<think>...</think> is dropped first: drafts there are not answers. A block cut off by the token limit
(opening fence, no closing one) still counts as a block, so the evaluator reports the truncation as a
syntax error instead of hiding it behind an extraction failure.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

_THINK_RE = re.compile(r"<think>.*?(?:</think>|\Z)", re.DOTALL)
_FENCE_RE = re.compile(
    r"^[ \t]*(`{3,}|~{3,})[ \t]*([\w+.-]*)[^\n]*\n(.*?)(?:^[ \t]*\1[ \t]*$|\Z)", re.DOTALL | re.M
)
_MODELNEW_RE = re.compile(r"^\s*class\s+ModelNew\b", re.MULTILINE)
_PY_LANGS = {"python", "py", "python3", ""}
_CODE_START_RE = re.compile(r"^(?:import |from |class |def |@|#|\"\"\"|[A-Za-z_]\w* *=)", re.MULTILINE)


@dataclass(frozen=True)
class Extraction:
    source: str | None
    method: str  # fenced-python | fenced-other | unfenced | none
    reason: str = ""  # why nothing usable was found (method == "none")

    @property
    def ok(self) -> bool:
        return self.source is not None


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) for every fenced block, in order; an unterminated last block runs to the end."""
    return [(m.group(2).lower(), m.group(3)) for m in _FENCE_RE.finditer(text)]


def _defines_modelnew(code: str) -> bool:
    return bool(_MODELNEW_RE.search(code))


def _unfenced(text: str) -> str | None:
    """The text from its first line that looks like code, if that parses as Python and defines ModelNew."""
    for m in _CODE_START_RE.finditer(text):
        candidate = text[m.start() :].strip() + "\n"
        try:
            ast.parse(candidate)
        except SyntaxError:
            continue
        return candidate if _defines_modelnew(candidate) else None
    return None


def extract(text: str) -> Extraction:
    """Find the candidate source in a completion; never raises."""
    if not text.strip():
        return Extraction(None, "none", "empty completion")
    visible = _THINK_RE.sub("", text)
    blocks = fenced_blocks(visible)
    python = [body for lang, body in blocks if lang in _PY_LANGS and _defines_modelnew(body)]
    if python:
        return Extraction(python[-1].strip() + "\n", "fenced-python")
    other = [body for _, body in blocks if _defines_modelnew(body)]
    if other:
        return Extraction(other[-1].strip() + "\n", "fenced-other")
    if not blocks and _defines_modelnew(visible):
        source = _unfenced(visible)
        if source is not None:
            return Extraction(source, "unfenced")
        return Extraction(
            None, "none", "the text mentions `class ModelNew` but no part of it parses as Python"
        )
    if blocks:
        return Extraction(None, "none", f"{len(blocks)} code block(s), none defines `class ModelNew`")
    if _defines_modelnew(text):
        return Extraction(None, "none", "`class ModelNew` appears only inside <think> reasoning")
    return Extraction(None, "none", "no code block and no `class ModelNew` in the completion")
