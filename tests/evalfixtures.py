"""Helpers shared by the evaluator's tests: fixture sources and a CPU run config."""

from __future__ import annotations

from pathlib import Path

from kbench.config import RunConfig

FIXTURES = Path(__file__).parent / "fixtures" / "eval"


def fixture_source(name: str) -> str:
    """The fixture's text, with a first line `# include: FILE` replaced by that file's text."""
    text = (FIXTURES / name).read_text()
    first = text.splitlines()[0]
    if first.startswith("# include:"):
        text = (FIXTURES / first.split(":", 1)[1].strip()).read_text() + "\n" + text
    return text


def cpu_config(cache_dir: Path, **kw: object) -> RunConfig:
    base: dict[str, object] = {
        "preset": "small",
        "device": "cpu",
        "backend": "cpp",
        "static_checks": False,
        "baselines": ["eager"],
        "timing_budget_s": 0.5,
        "timeout_s": 120.0,
        "cache_dir": cache_dir,
    }
    base.update(kw)
    return RunConfig(**base)  # type: ignore[arg-type]
