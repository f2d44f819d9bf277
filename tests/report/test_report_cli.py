"""`kbench runs`, `report`, `export` and `baseline --import/--export` from the command line."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from report_fakes import MODELS, PROBLEMS
from typer.testing import CliRunner

from kbench.cli import app
from kbench.store import Store

runner = CliRunner()


def test_runs_report_and_export(example: tuple[Store, list[str]], tmp_path: Path) -> None:
    store, runs = example
    db = str(store.path)
    listed = runner.invoke(app, ["runs", "--store", db, "--format", "json"])
    assert listed.exit_code == 0, listed.output
    assert [r["run_id"] for r in json.loads(listed.output)] == runs

    out = tmp_path / "r.html"
    rep = runner.invoke(app, ["report", *runs, "--store", db, "--out", str(out)])
    assert rep.exit_code == 0, rep.output
    assert "fast_1" in rep.output and out.read_text().count('class="problems-row"') == len(PROBLEMS)

    jl = runner.invoke(app, ["export", "latest", "--store", db, "--format", "jsonl"])
    assert jl.stderr == ""  # model-b's run is complete: no warning
    rows = [json.loads(line) for line in jl.output.splitlines()]
    assert len(rows) == len(PROBLEMS) and {r["model"] for r in rows} == {MODELS[1]}
    assert rows[0]["verdict"]["status"] and "ModelNew" in rows[0]["candidate_source"]

    c = runner.invoke(app, ["export", runs[0], "--store", db, "--format", "csv"])
    assert c.stderr.startswith("warning: example/model-a: incomplete run: 14 of 15 verdicts")
    table = list(csv.DictReader(io.StringIO(c.stdout)))
    assert len(table) == len(PROBLEMS)
    ok = [r for r in table if r["status"] == "ok"]
    assert ok and all(float(r["speedup_eager_low"]) <= float(r["speedup_eager"]) for r in ok)


def test_unknown_run_and_format(example: tuple[Store, list[str]]) -> None:
    store, _ = example
    bad = runner.invoke(app, ["report", "nope", "--store", str(store.path)])
    assert bad.exit_code != 0 and "no run 'nope'" in str(bad.exception)
    fmt = runner.invoke(app, ["export", "latest", "--store", str(store.path), "--format", "xml"])
    assert "unknown export format" in str(fmt.exception)


def test_baseline_import_then_export(tmp_path: Path) -> None:
    data = {"level1": {"3_Matmul.py": {"mean": 1.5, "std": 0.1, "min": 1.4, "max": 2.0, "num_trials": 100,
                                       "hardware": "NVIDIA H100", "device": "cuda:0"}}}  # fmt: skip
    src = tmp_path / "H100" / "baseline_time_torch.json"
    src.parent.mkdir()
    src.write_text(json.dumps(data))
    db = str(tmp_path / "k.db")
    imp = runner.invoke(app, ["baseline", "--store", db, "--import", str(src)])
    assert imp.exit_code == 0, imp.output
    assert "imported 1 eager baselines under fingerprint upstream:H100" in imp.output
    store = Store(db)
    assert store.get_baseline("hf:1/3", "full", "fp32", "eager", "upstream:H100", "upstream") is not None


def test_report_restricted_to_a_hidden_shape_result(tmp_path: Path) -> None:
    """A run with --hidden-shapes: the summary counts the checked verdicts, `--generalizes` keeps one kind."""
    from dataclasses import replace

    from report_fakes import problems, verdicts

    store = Store(tmp_path / "k.db")
    store.put_problems(problems())
    run = store.start_run({"model": MODELS[0]}, {"gpu": "NVIDIA H200"}, "hidden-1")
    flags = iter([True, False] * len(PROBLEMS))
    for key, v, source in verdicts(0):
        store.record(run, key, replace(v, generalizes=next(flags)) if v.ok else v, source, "")
    ok = [v for _, v, _ in verdicts(0) if v.ok]
    db = str(store.path)
    every = runner.invoke(app, ["report", run, "--store", db, "--no-html"])
    assert every.exit_code == 0, every.output
    row = next(line for line in every.output.splitlines() if "generalizes (hidden sizes)" in line)
    assert f"{(len(ok) + 1) // 2}/{len(ok)} (" in row
    no = runner.invoke(app, ["report", run, "--store", db, "--no-html", "--generalizes", "no"])
    row = next(line for line in no.output.splitlines() if "generalizes (hidden sizes)" in line)
    assert no.exit_code == 0 and f"0/{len(ok) // 2} (0%)" in row
    bad = runner.invoke(app, ["report", run, "--store", db, "--no-html", "--generalizes", "maybe"])
    assert bad.exit_code != 0 and "unknown generalizes filter" in str(bad.exception)
