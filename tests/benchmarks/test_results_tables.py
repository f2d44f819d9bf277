"""benchmarks/results: every committed Markdown table is what benchmarks/tables.py makes from its records."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import common  # noqa: E402
import tables  # noqa: E402

JSONL = tables.all_jsonl(BENCHMARKS / "results")


def test_results_are_filed_by_hardware_and_benchmark() -> None:
    assert JSONL, "no records under benchmarks/results"
    loose = [p for p in (BENCHMARKS / "results").iterdir() if p.is_file()]
    assert not loose, f"results belong in <hardware>/<benchmark>.jsonl: {loose}"
    unfiled = [md for md in (BENCHMARKS / "results").glob("*/*.md") if not md.with_suffix(".jsonl").exists()]
    assert not unfiled, (
        f"a table without records: file it with `python benchmarks/tables.py ingest`: {unfiled}"
    )


@pytest.mark.parametrize("path", JSONL, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_the_markdown_is_generated_from_the_records(path: Path) -> None:
    md = path.with_suffix(".md")
    assert md.exists(), f"{md} missing: run python benchmarks/tables.py"
    assert md.read_text() == tables.render(path), (
        f"{md} differs from its records: run python benchmarks/tables.py"
    )


@pytest.mark.parametrize("path", JSONL, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_record_has_the_schema_and_its_raw_files(path: Path) -> None:
    for record in tables.read(path):
        assert tuple(record) == tables.RECORD_KEYS
        assert (record["hardware"], record["benchmark"]) == (path.parent.name, path.stem)
        for artifact in record["artifacts"]:
            assert artifact.startswith(f"{record['benchmark']}/"), artifact
            assert (path.parent / artifact).is_file(), artifact


def test_a_script_report_is_filed_and_rendered(tmp_path: Path) -> None:
    report = "\n".join(
        [
            "# Chaos: SIGKILL at a random moment (2026-12-01T10:00:00+00:00)",
            "",
            "kbench 0.1.0, torch 2.13.0+cpu, python 3.11.7",
            "",
            "| cycle | killed at s | lost |",
            "|---|---|---|",
            "| 0 | 12.5 | 0 |",
        ]
    )
    raw = tmp_path / "chaos.log"
    raw.write_text("cycle 0\n")
    md = common.record_markdown(tmp_path / "results", "chaos", report, metrics={"lost": 0}, artifacts=[raw])
    assert md is not None
    jsonl = md.with_suffix(".jsonl")
    (record,) = tables.read(jsonl)
    assert record["benchmark"] == "chaos" and record["title"].startswith("Chaos")
    assert record["body"][-1] == {
        "table": {"columns": ["cycle", "killed at s", "lost"], "rows": [[0, 12.5, 0]]}
    }
    assert (jsonl.parent / record["artifacts"][0]).read_text() == "cycle 0\n"
    assert md.read_text() == tables.render(jsonl)
    assert "| 0 | 12.5 | 0 |" in md.read_text()


def test_ingest_files_a_markdown_output_and_merge_skips_what_is_there(tmp_path: Path) -> None:
    src = tmp_path / "kill-hang.md"
    src.write_text(
        "# Kill during a hang (2026-12-01T05:33:36+00:00)\n\nkbench 0.1.0, torch 2.11.0+cu130, python 3.12.3\n\n"
        "`python benchmarks/kill_hang.py`: a hang.\n\n| command | exit |\n|---|---|\n| `kbench eval` | 130 |\n"
    )
    other = tmp_path / "other"
    argv = ["--results", str(other), "ingest", str(src), "--hardware", "h200", "--benchmark", "kill-hang"]
    assert tables.main(argv) == 0
    (record,) = tables.read(other / "h200" / "kill-hang.jsonl")
    assert (
        record["date"] == "2026-12-01T05:33:36+00:00"
        and record["command"] == "python benchmarks/kill_hang.py"
    )
    assert record["versions"]["torch"] == "2.11.0+cu130"
    # with the measuring machine's `kbench env --format json`, its facts rather than the text's guesses
    env = tmp_path / "env.json"
    env.write_text(json.dumps({"kbench": "0.1.0", "torch": "2.11.0", "python": "3.12.3", "cpu": "Xeon",
                               "cpu_count": 16, "gpu": "NVIDIA H200", "gpu_count": 1, "driver": "580"}))  # fmt: skip
    assert tables.main([*argv, "--env", str(env), "--commit", "abc1234"]) == 0
    _, second = tables.read(other / "h200" / "kill-hang.jsonl")
    assert second["machine"] == "Xeon x 16, 1x NVIDIA H200" and second["kbench"]["commit"] == "abc1234"
    assert second["versions"]["torch"] == "2.11.0" and second["versions"]["driver"] == "580"
    assert second["hardware"] == "h200"  # --hardware, as given
    here = tmp_path / "here"
    for _ in range(2):
        assert tables.main(["--results", str(here), "merge", str(other)]) == 0
    assert len(tables.read(here / "h200" / "kill-hang.jsonl")) == 2  # merged twice, filed once each
    assert tables.main(["--results", str(here), "--check"]) == 0
    (here / "h200" / "kill-hang.md").write_text("edited by hand\n")
    assert tables.main(["--results", str(here), "--check"]) == 1


def test_the_hardware_folder_is_named_after_the_gpu() -> None:
    assert common.hardware_name(None) == "cpu"
    assert common.hardware_name("NVIDIA H200") == "h200"
    assert common.hardware_name("NVIDIA H100 80GB HBM3") == "h100"
    assert common.hardware_name("NVIDIA H100 PCIe") == "h100-pcie"
    env = json.loads(json.dumps(common.environment()))
    assert set(env) == {"hardware", "kbench", "versions", "machine"} and env["versions"]["python"]


def test_a_recorded_command_names_no_path_of_the_machine_it_ran_on() -> None:
    argv = [str(BENCHMARKS / "verdict_speed.py"), "--out", "/root/out/speed", "--cold", "2/1", "--record",
            "/root/out/results", "--cache=/tmp/kbench-cache-x1"]  # fmt: skip
    assert (
        common.command_line(argv) == "python benchmarks/verdict_speed.py --out OUT --cold 2/1 --cache=CACHE"
    )
    bare = [str(BENCHMARKS / "scaling.py"), "--record", "--gpus", "1,2", "--work-dir", "/scratch/w"]
    assert common.command_line(bare) == "python benchmarks/scaling.py --gpus 1,2 --work-dir WORK_DIR"


def test_a_record_names_its_commit_and_says_when_the_files_differ(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import subprocess

    monkeypatch.delenv(common.COMMIT_ENV, raising=False)
    assert common.commit(tmp_path) is None  # not a git work tree
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    (tmp_path / "a.py").write_text("x = 1\n")
    subprocess.run([*git, "add", "a.py"], check=True)
    subprocess.run([*git, "commit", "-qm", "a"], check=True)
    head = subprocess.run(
        [*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    (tmp_path / "notes.txt").write_text("untracked files are not what was measured\n")
    assert common.commit(tmp_path) == head
    (tmp_path / "a.py").write_text("x = 2\n")
    assert common.commit(tmp_path) == f"{head}+changes"
    monkeypatch.setenv(common.COMMIT_ENV, "abc1234")
    assert common.commit(tmp_path) == "abc1234"
