"""A problem file's identity: its name and content, never where it lies. Files with one KernelBench number
share a selection, and a run's stored keys are found again after the files moved."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kbench.problems import find_problems, get_problem, select
from kbench.problems.sources import content_number

CODE = """
import torch
import torch.nn as nn

n = 64
KBENCH_PRESETS = {"small": {"n": 8}}


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x * SCALE)


def get_inputs():
    return [torch.randn(n)]


def get_init_inputs():
    return []
"""


def _write(root: Path, rel: str, scale: str = "2.0") -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(CODE.replace("SCALE", scale))
    return path


def test_two_files_with_one_kernelbench_number_share_a_selection(tmp_path: Path) -> None:
    """`probs/1_Foo.py` and `other/1_Baz.py` are different problems: each takes its content number, so
    their keys and generations files differ, whichever comes first."""
    foo, baz = _write(tmp_path, "probs/1_Foo.py"), _write(tmp_path, "other/1_Baz.py", "3.0")
    chosen = select(ids=[str(foo), str(baz)])
    assert [p.name for p in chosen] == ["Foo", "Baz"]
    assert [p.number for p in chosen] == [content_number(foo.read_text()), content_number(baz.read_text())]
    assert len({p.key for p in chosen}) == len({(p.level, p.number) for p in chosen}) == 2
    assert [p.key for p in select(ids=[str(baz), str(foo)])] == [chosen[1].key, chosen[0].key]
    alone = get_problem(str(foo))
    assert (alone.level, alone.number) == (0, 1)  # its KernelBench number, when nothing else has it


def test_a_file_that_shares_a_suite_problem_id_takes_its_content_number(tmp_path: Path) -> None:
    mine = _write(tmp_path, "level2/1_Mine.py")
    suite, file = select(ids=["2/1", str(mine)])
    assert suite.key == "kbench:2/1"
    assert (file.level, file.number) == (2, content_number(mine.read_text()))


def test_a_run_finds_its_problem_files_after_they_moved(tmp_path: Path) -> None:
    """By content: the stored key names the file wherever it is now, with the level and number the run
    filed it under; an edited file is another problem, found nowhere."""
    _write(tmp_path, "probs/1_Foo.py")
    _write(tmp_path, "probs/level3/relu.py", "3.0")
    foo, relu = select(ids=[str(tmp_path / "probs/1_Foo.py"), str(tmp_path / "probs/level3/relu.py")])
    keys = [foo.key, relu.key]
    assert find_problems(keys, [str(tmp_path / "probs")], {})[0] == [foo, relu]
    shutil.move(tmp_path / "probs", tmp_path / "moved")
    assert find_problems(keys, [str(tmp_path / "probs")], {}) == ([], keys)
    found, missing = find_problems(keys, [str(tmp_path / "moved")], {})
    assert [p.key for p in found] == keys and missing == []
    assert found[0].path == str(tmp_path / "moved" / "1_Foo.py")
    shutil.move(tmp_path / "moved" / "level3" / "relu.py", tmp_path / "moved" / "renamed.py")
    assert find_problems([relu.key], [str(tmp_path / "moved" / "renamed.py")], {})[0][0].key == relu.key
    (tmp_path / "moved" / "1_Foo.py").write_text(CODE.replace("SCALE", "4.0"))
    found, missing = find_problems(keys, [str(tmp_path / "moved")], {})
    assert [p.key for p in found] == [relu.key] and missing == [foo.key]


def test_path_keys_resolve_where_they_are_and_by_their_stored_hash_after_a_move(tmp_path: Path) -> None:
    """Keys that hold a path (a folder source's, `/abs/KB:1/3`, and a file's as `/abs/x.py:0/1`) keep
    their key: read at the path while its code has the stored hash, else found by that hash."""
    _write(tmp_path, "KB/level1/3_Relu.py")
    single = _write(tmp_path, "one/1_Foo.py", "5.0")
    in_folder = get_problem(f"{tmp_path / 'KB'}:1/3")
    file_key = f"{single}:0/1"
    hashes = {in_folder.key: in_folder.code_hash, file_key: get_problem(str(single)).code_hash}
    keys = [in_folder.key, file_key]
    found, _ = find_problems(keys, [], hashes)
    assert [p.key for p in found] == keys and found[1].path == str(single)
    shutil.move(tmp_path / "KB", tmp_path / "KB2")
    shutil.move(tmp_path / "one", tmp_path / "two")
    assert find_problems(keys, [], hashes) == ([], keys)
    found, missing = find_problems(keys, [str(tmp_path / "KB2"), str(tmp_path / "two")], hashes)
    assert [p.key for p in found] == keys and missing == []
    assert found[0].path == str(tmp_path / "KB2" / "level1" / "3_Relu.py") and found[0].name == "Relu"


@pytest.mark.parametrize("where", ["level1/1_Foo.py", "1_Foo.py"])
def test_a_moved_file_keeps_its_level_from_the_key(tmp_path: Path, where: str) -> None:
    before = get_problem(str(_write(tmp_path / "a", "level1/1_Foo.py")))
    _write(tmp_path / "b", where)
    found, _ = find_problems([before.key], [str(tmp_path / "b")], {})
    assert (found[0].level, found[0].number, found[0].key) == (1, 1, before.key)
