"""`replay/PATH`: serve recorded completions or kernel files from a folder, offline.

Files are matched to requests by level, problem id, sample and turn, so old generations can be re-judged:

    level_2_problem_17_sample_0_kernel.py      upstream KernelBench run folders (turn 0)
    level_2_problem_17_sample_0_turn_1.md      a raw completion (`kbench generate` writes these)
    level_2_problem_17_sample_0_turn_1.py      a candidate source

When a folder holds both a completion and a candidate for one key, the completion wins: extraction then
runs again on exactly what the model said. A missing file is a final error (the sample gets `no_code`).
"""

from __future__ import annotations

import re
from pathlib import Path

from kbench.errors import ConfigError
from kbench.llm.base import GenParams, Request, register_provider
from kbench.types import Completion

_NAME_RE = re.compile(r"^level_(\d+)_problem_(\d+)_sample_(\d+)(?:_turn_(\d+))?(?:_kernel)?\.(py|md|txt)$")
# Lower wins when one key has several files.
_RANK = {"md": 0, "txt": 1, "py": 2}

Key = tuple[int, int, int, int]  # level, problem, sample, turn


def index_folder(folder: Path) -> dict[Key, Path]:
    """Map (level, problem, sample, turn) to the file that answers it; looks in FOLDER and FOLDER/*/."""
    found: dict[Key, Path] = {}
    for path in sorted([*folder.glob("*"), *folder.glob("*/*")]):
        m = _NAME_RE.match(path.name)
        if not m or not path.is_file():
            continue
        key = (int(m.group(1)), int(m.group(2)), int(m.group(3)), int(m.group(4) or 0))
        old = found.get(key)
        if old is None or _RANK[path.suffix[1:]] < _RANK[old.suffix[1:]]:
            found[key] = path
    return found


class ReplayProvider:
    name = "replay"
    cacheable = False
    errors_are_final = True

    def __init__(self, folder: str, params: GenParams) -> None:
        self.folder = Path(folder).expanduser()
        if not self.folder.is_dir():
            raise ConfigError(f"replay/{folder}: no such folder (replay/PATH names a folder of completions)")
        self.files = index_folder(self.folder)
        if not self.files:
            raise ConfigError(
                f"replay/{folder}: no files named level_L_problem_P_sample_S[_turn_T][_kernel].(py|md|txt)"
            )

    async def complete(self, request: Request) -> Completion:
        key = (request.level, request.number, request.sample, request.turn)
        path = self.files.get(key)
        if path is None:
            return Completion(
                model=request.model,
                text="",
                error=f"replay: no file for level {key[0]} problem {key[1]} sample {key[2]} turn {key[3]}",
            )
        return Completion(model=request.model, text=path.read_text())

    async def aclose(self) -> None:
        return None


@register_provider("replay")
def _make(folder: str, params: GenParams) -> ReplayProvider:
    return ReplayProvider(folder, params)
