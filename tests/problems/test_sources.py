"""Problem sources: KernelBench-layout folders, single files, the HF dataset, errors and presets."""

from __future__ import annotations

import hashlib
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kbench.cli import app
from kbench.errors import ProblemError
from kbench.problems import build_model, get_problem, load, select
from kbench.problems.loader import preset_note

PROBLEM = textwrap.dedent(
    '''
    """Scale then ReLU."""
    import torch
    import torch.nn as nn

    n = 64
    hidden = n * 2
    KBENCH_PRESETS = {"small": {"n": 8}}
    KBENCH_TAGS = ["elementwise"]

    class Model(nn.Module):
        def __init__(self, k):
            super().__init__()
            self.k = k

        def forward(self, x):
            return torch.relu(x * self.k)

    def get_inputs():
        return [torch.randn(n, hidden)]

    def get_init_inputs():
        return [2.0]
    '''
)
UPSTREAM = PROBLEM.replace('KBENCH_PRESETS = {"small": {"n": 8}}\n', "").replace(
    'KBENCH_TAGS = ["elementwise"]\n', ""
)


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_kernelbench_layout_directory(tmp_path: Path) -> None:
    root = _tree(
        tmp_path / "KB",
        {"level1/1_Relu.py": UPSTREAM, "level1/2_Other.py": UPSTREAM, "level2/7_Fused.py": PROBLEM},
    )
    problems = select(str(root))
    assert [(p.level, p.number, p.name) for p in problems] == [
        (1, 1, "Relu"),
        (1, 2, "Other"),
        (2, 7, "Fused"),
    ]
    assert get_problem(f"{root}:2/7").tags == ("elementwise",)
    assert get_problem(f"{root}:Other").number == 2
    result = CliRunner().invoke(app, ["list", "--source", str(root), "--format", "json"])
    assert result.exit_code == 0
    assert '"name": "Fused"' in result.output


def test_upstream_repository_root(tmp_path: Path) -> None:
    _tree(tmp_path / "repo" / "KernelBench", {"level3/4_Net.py": UPSTREAM})
    assert [p.key for p in select(str(tmp_path / "repo"))] == [f"{tmp_path / 'repo'}:3/4"]


def test_upstream_file_loads_unchanged(tmp_path: Path) -> None:
    path = _tree(tmp_path, {"level1/5_Relu.py": UPSTREAM}) / "level1" / "5_Relu.py"
    p = get_problem(str(path) + ":")
    assert (p.level, p.number, p.presets) == (1, 5, ("full",))
    loaded = load(p)
    assert loaded.sizes == {"n": 64, "hidden": 128}
    out = build_model(loaded)(*loaded.get_inputs())
    assert out.shape == (64, 128)


def test_a_file_without_the_small_preset_runs_at_its_own_sizes(tmp_path: Path) -> None:
    path = _tree(tmp_path, {"level1/5_Relu.py": UPSTREAM}) / "level1" / "5_Relu.py"
    p = get_problem(str(path))
    assert load(p, "small").sizes == load(p).sizes == {"n": 64, "hidden": 128}
    assert preset_note(p, "small") == f"{p.key} has no `small` preset: it runs at the sizes its file sets"
    assert preset_note(p, "full") == ""
    with_small = get_problem(str(_tree(tmp_path, {"7_A.py": PROBLEM}) / "7_A.py"))
    assert preset_note(with_small, "small") == "" and load(with_small, "small").sizes["n"] == 8


def test_file_problems_have_a_stable_identity(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Level from the folder, number from the KernelBench name, else from the content; the key holds the
    name and the content's digest, never the path, so it reads the same wherever the file lies."""
    _tree(tmp_path, {"level2/19_My_Problem.py": UPSTREAM, "a/relu.py": UPSTREAM, "b/relu.py": PROBLEM})
    monkeypatch.chdir(tmp_path)
    named = get_problem("level2/19_My_Problem.py")
    digest = hashlib.sha256(UPSTREAM.encode()).hexdigest()
    assert (named.level, named.number) == (2, 19) and named.key == f"file:My_Problem@{digest[:8]}:2/19"
    assert named.path == f"{tmp_path}/level2/19_My_Problem.py"
    a, b = get_problem("a/relu.py"), get_problem("b/relu.py")
    assert (a.level, b.level) == (0, 0) and a.number != b.number  # different content, different numbers
    assert a.number == int(digest[:7], 16)
    assert [p.key for p in select(ids=["a/relu.py", "b/relu.py", str(named.path)])] == [
        a.key,
        b.key,
        named.key,
    ]
    twin = _tree(tmp_path, {"c/relu.py": UPSTREAM}) / "c" / "relu.py"
    assert get_problem(str(twin)).key == a.key  # the same name and content: the same problem, anywhere
    assert select(ids=["a/relu.py", str(twin)]) == [a]  # given twice, it runs once
    copy = _tree(tmp_path, {"c/other.py": UPSTREAM}) / "c" / "other.py"
    with pytest.raises(
        ProblemError, match=r"duplicate problem id 0/\d+: .*relu.py and .*other.py \(they hold the same code"
    ):
        select(ids=["a/relu.py", str(copy)])
    with pytest.raises(
        ProblemError, match="the key of a problem file names its content.*give the file's path"
    ):
        get_problem(a.key)


def test_a_relative_file_is_read_where_it_is_now_and_as_it_is_now(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same relative path from two working folders names two files, and an edited file is read
    again: a long-lived process (the service, a test session) never answers with another folder's or an
    older version's problem."""
    _tree(tmp_path / "one", {"p/relu.py": PROBLEM})
    _tree(tmp_path / "two", {"p/relu.py": UPSTREAM})
    monkeypatch.chdir(tmp_path / "one")
    first = get_problem("p/relu.py")
    monkeypatch.chdir(tmp_path / "two")
    second = get_problem("p/relu.py")
    assert first.code == PROBLEM and second.code == UPSTREAM and first.key != second.key
    edited = UPSTREAM.replace("torch.relu(", "2 * torch.relu(")
    assert edited != UPSTREAM
    (tmp_path / "two" / "p" / "relu.py").write_text(edited + "\n# edited\n")
    assert get_problem("p/relu.py").code == edited + "\n# edited\n"


def test_presets_rewrite_constants_and_do_not_leak(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"level1/1_A.py": PROBLEM, "level1/2_B.py": PROBLEM})
    a, b = select(str(root))
    small = load(a, "small")
    full_b = load(b)
    full_a = load(a)
    assert small.sizes == {"n": 8, "hidden": 16}  # the derived constant follows the override
    assert full_a.sizes == full_b.sizes == {"n": 64, "hidden": 128}
    assert small.module is not full_a.module
    assert small.get_inputs()[0].shape == (8, 16)
    assert full_a.get_inputs()[0].shape == (64, 128)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("def broken(:\n", "syntax error at line 1"),
        (PROBLEM.replace("class Model", "class Other"), "no `class Model`"),
        (PROBLEM.replace("def get_inputs", "def get_x"), "missing function(s) get_inputs"),
        (PROBLEM.replace('{"n": 8}', '{"m": 8}'), "overrides m, which the file does not assign"),
        (PROBLEM.replace('["elementwise"]', "[1, 2]"), "KBENCH_TAGS must be a list of strings"),
    ],
)
def test_malformed_problem_is_a_one_line_error_naming_the_file(
    tmp_path: Path, text: str, fragment: str
) -> None:
    root = _tree(tmp_path, {"level1/1_Good.py": PROBLEM, "level1/2_Bad.py": text})
    with pytest.raises(ProblemError, match="2_Bad.py") as info:
        select(str(root))
    assert fragment in str(info.value)
    result = CliRunner().invoke(app, ["list", "--source", str(root)])
    assert result.exit_code == 2 or isinstance(result.exception, ProblemError)


def test_duplicate_ids_and_bad_names(tmp_path: Path) -> None:
    dup = _tree(tmp_path / "dup", {"level1/3_A.py": PROBLEM, "level1/3_B.py": PROBLEM})
    with pytest.raises(ProblemError, match=r"duplicate problem id 1/3: .*3_A.py and .*3_B.py"):
        select(str(dup))
    bad = _tree(tmp_path / "bad", {"level1/noid.py": PROBLEM})
    with pytest.raises(ProblemError, match="noid.py: file name must be ID_Name.py"):
        select(str(bad))
    with pytest.raises(ProblemError, match="no such problem source"):
        select(str(tmp_path / "missing"))


def test_huggingface_source_from_a_local_dataset(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets", reason="the hf extra is not installed")
    rows = lambda level, ids: {  # noqa: E731
        "problem_id": ids,
        "name": [f"{i}_Relu_{i}.py" for i in ids],
        "code": [UPSTREAM] * len(ids),
        "level": [level] * len(ids),
    }
    data = datasets.DatasetDict(
        {
            "level_1": datasets.Dataset.from_dict(rows(1, [1, 2])),
            "level_2": datasets.Dataset.from_dict(rows(2, [5])),
        }
    )
    data.save_to_disk(str(tmp_path / "kb"))
    spec = f"hf={tmp_path / 'kb'}"
    problems = select(spec)
    assert [(p.key, p.name) for p in problems] == [
        ("hf:1/1", "Relu_1"),
        ("hf:1/2", "Relu_2"),
        ("hf:2/5", "Relu_5"),
    ]
    loaded = load(get_problem(f"{spec}:2/5"))
    assert build_model(loaded)(*loaded.get_inputs()).shape == (64, 128)


def test_cli_show_missing_problem_exit_code(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["show", "kbench:1/9999"])
    assert isinstance(result.exception, ProblemError)


@pytest.mark.parametrize(
    ("address", "says"),
    [
        (
            "2/999",
            "no problem 2/999 in source 'kbench'; level 2 has 2/1 to 2/113: `kbench list --level 2` lists them",
        ),
        ("7/1", "no problem 7/1 in source 'kbench'; its levels are 1, 2, 3, 5: `kbench list` lists them"),
        ("Gemm_Relus", "nearest: Gemm_ReLU (2/1), "),
        (
            "zzzz_nothing_like_it",
            "no problem named 'zzzz_nothing_like_it' in source 'kbench'; `kbench list` lists them",
        ),
    ],
)
def test_an_unknown_problem_names_the_nearest_and_kbench_list(address: str, says: str) -> None:
    with pytest.raises(ProblemError) as caught:
        get_problem(address)
    assert says in str(caught.value)


def test_an_unknown_problem_of_another_source_names_that_source(tmp_path: Path) -> None:
    (tmp_path / "level1").mkdir()
    (tmp_path / "level1" / "1_Relu.py").write_text(UPSTREAM)
    with pytest.raises(
        ProblemError, match=f"level 1 has 1/1 to 1/1: `kbench list --source {tmp_path} --level 1`"
    ):
        get_problem(f"{tmp_path}:1/5")
