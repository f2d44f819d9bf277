"""Helpers shared by the evaluator's tests: fixture sources and a CPU run config.

The fixtures in fixtures/eval/ carry the anti-cheat fixtures' header (`# expect: STATUS [RULE]`,
`# include: FILE`; kbench.selftest.runner.parse_header reads both sets).
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from kbench.config import RunConfig
from kbench.selftest.runner import fixture_text

FIXTURES = Path(__file__).parent / "fixtures" / "eval"


def fixture_source(name: str) -> str:
    """The fixture's text, after the text of the file its `# include: FILE` header names."""
    return fixture_text(FIXTURES / name)


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


def cpu_config_file(folder: Path, **kw: object) -> Path:
    """`cpu_config`'s run settings (and `kw`) as a JSON config file in `folder`, for commands started by
    the tests (`--config`)."""
    cfg = cpu_config(folder / "unused", **kw)
    keys = ("preset", "device", "backend", "static_checks", "baselines", "timing_budget_s", "timeout_s")
    path = folder / "config.json"
    path.write_text(json.dumps({k: getattr(cfg, k) for k in keys}))
    return path


def use_builds(cache_dir: Path, builds: Path) -> Path:
    """`cache_dir`, made, with its build cache linked to `builds` (the session's, conftest.shared_builds):
    what was built once is loaded from there. Its reference cache and the rest stay its own."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    link = cache_dir / "builds"
    if not link.is_symlink():
        link.symlink_to(builds, target_is_directory=True)
    return cache_dir


def built_anew(source: str, tag: str) -> str:
    """A cpp fixture's `source` with its extension named after `tag`: a build the session's build cache
    does not hold (nor any other test's), compiled against the session's precompiled header (its flags
    are the same)."""
    suffix = hashlib.sha256(tag.encode()).hexdigest()[:12]
    marked = re.sub(r'name="(kbench_fixture_\w+)"', rf'name="\1_{suffix}"', source, count=1)
    assert marked != source, "no extension name to change"
    return marked
