"""Extraction: which block is the answer, the fallbacks, and the reasons when there is none."""

from __future__ import annotations

import pytest

from kbench.extract import extract

F = "```"


def test_last_python_block_defining_modelnew_wins() -> None:
    text = f"Draft:\n{F}python\nclass ModelNew: a = 1\n{F}\nFinal:\n{F}python\nclass ModelNew: a = 2\n{F}\n{F}python\nprint('usage')\n{F}"
    e = extract(text)
    assert e.method == "fenced-python" and e.source == "class ModelNew: a = 2\n"


def test_falls_back_to_other_fenced_block() -> None:
    e = extract(f"{F}text\nimport torch\nclass ModelNew(torch.nn.Module):\n    pass\n{F}")
    assert e.method == "fenced-other" and e.source is not None and e.source.startswith("import torch")


def test_unfenced_source_after_prose() -> None:
    e = extract("Sure, here you go:\nimport torch\n\nclass ModelNew(torch.nn.Module):\n    pass\n")
    assert (
        e.method == "unfenced" and e.source == "import torch\n\nclass ModelNew(torch.nn.Module):\n    pass\n"
    )


def test_truncated_block_is_still_the_answer() -> None:
    e = extract(f"{F}python\nclass ModelNew:\n    def forward(self):\n        return (")
    assert e.method == "fenced-python" and e.source is not None and "return (" in e.source


def test_think_section_is_ignored() -> None:
    text = (
        f"<think>{F}python\nclass ModelNew: draft = 1\n{F}</think>\n{F}python\nclass ModelNew: final = 1\n{F}"
    )
    assert extract(text).source == "class ModelNew: final = 1\n"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "empty completion"),
        ("I cannot help with that.", "no code block"),
        (f"{F}python\nclass Model: pass\n{F}", "none defines `class ModelNew`"),
        (f"<think>{F}python\nclass ModelNew: pass\n{F}</think> sorry", "only inside <think>"),
        ("class ModelNew is what I would write, if (", "no part of it parses"),
    ],
)
def test_nothing_usable_gives_a_reason(text: str, reason: str) -> None:
    e = extract(text)
    assert e.source is None and e.method == "none" and reason in e.reason
