"""benchmarks/upstream_flow.py: the emulated upstream flow judges and times candidates in fresh processes."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import upstream_flow as uf  # noqa: E402

from kbench.executors import Job  # noqa: E402
from kbench.problems import get_problem  # noqa: E402
from kbench.types import Candidate  # noqa: E402

PROBLEM = "kbench:2/1"
HONEST = "\n\nclass ModelNew(Model):\n    pass\n"
WRONG = (
    "\n\nclass ModelNew(Model):\n    def forward(self, *args):\n        return super().forward(*args) + 1.0\n"
)


def _candidate(tmp_path: Path, name: str, tail: str) -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text(get_problem(PROBLEM).code + tail)
    return path


def test_an_honest_candidate_is_correct_and_timed(tmp_path: Path) -> None:
    row = uf.child_eval(PROBLEM, "small", _candidate(tmp_path, "honest", HONEST), "cpu")
    assert row["correct"] and row["max_diff"] == 0.0 and row["mean_ms"] > 0


def test_a_wrong_candidate_is_not_timed(tmp_path: Path) -> None:
    row = uf.child_eval(PROBLEM, "small", _candidate(tmp_path, "wrong", WRONG), "cpu")
    assert not row["correct"] and row["why"] == "values" and "mean_ms" not in row


def test_the_flow_builds_then_evaluates_each_in_its_own_process(tmp_path: Path) -> None:
    problem = get_problem(PROBLEM)
    jobs = [
        Job(problem, Candidate(problem.key, "cpp", problem.code + tail), tag=i)
        for i, tail in enumerate((HONEST, WRONG))
    ]
    res = uf.run_flow(jobs, tmp_path, builders=2, device="cpu", preset="small", timeout=120)
    s = uf.summarize(res)
    assert (s["candidates"], s["builds_ok"], s["correct"], s["errors"]) == (2, 2, 1, 0)
    assert [r["kind"] for r in res["builds"] + res["evals"]] == ["build", "build", "eval", "eval"]
    assert s["seconds_per_verdict"] == round(res["wall_s"] / 2, 2) and res["built_at_s"] <= res["wall_s"]
    assert (tmp_path / "upstream_flow.jsonl").read_text().count("\n") == 4


def test_side_by_side_compares_speed_and_verdicts() -> None:
    upstream = {
        "evals": [
            {"tag": 0, "correct": True, "wall_s": 10.0},
            {"tag": 1, "correct": False, "wall_s": 5.0},
            {"tag": 2, "error": "timed out", "wall_s": 600.0},
        ],
        "builds": [{"tag": t, "wall_s": 60.0} for t in range(3)],
        "built_at_s": 60.0,
        "wall_s": 48.0,
    }
    kbench = {
        "summary": {"seconds_per_verdict": 4.0},
        "cold": {
            "verdicts": [{"tag": 0, "status": "ok"}, {"tag": 1, "status": "ok"}, {"tag": 7, "status": "ok"}]
        },
    }
    s = uf.side_by_side(upstream, kbench)
    assert (s["upstream_seconds_per_verdict"], s["speedup"], s["candidates_judged_by_both"]) == (16.0, 4.0, 2)
    assert s["verdicts_that_differ"] == [{"tag": 1, "kbench": "ok", "upstream_correct": False}]


def test_a_flow_past_its_time_limit_starts_no_more_evaluations(tmp_path: Path) -> None:
    problem = get_problem(PROBLEM)
    jobs = [Job(problem, Candidate(problem.key, "cpp", problem.code + HONEST), tag=i) for i in range(3)]
    res = uf.run_flow(jobs, tmp_path, builders=3, device="cpu", preset="small", timeout=120, max_seconds=0.0)
    s = uf.summarize(res)
    # every candidate built, none evaluated after the limit: the summary says how many were left
    assert len(res["builds"]) == 3 and res["evals"] == [] and res["cut"] == 3
    assert (
        s["candidates"] == 0
        and s["not_evaluated_after_max_seconds"] == 3
        and s["seconds_per_verdict"] is None
    )
    rows = (tmp_path / "upstream_flow.jsonl").read_text().splitlines()
    assert len(rows) == 3 and all('"done_at"' in r for r in rows)


def test_a_cut_flow_projects_the_whole_batch_from_its_mean_evaluation() -> None:
    res = {
        "builds": [{"tag": t, "wall_s": 60.0} for t in range(4)],
        "evals": [{"tag": 0, "correct": True, "wall_s": 6.0}, {"tag": 1, "correct": True, "wall_s": 8.0}],
        "built_at_s": 60.0,
        "wall_s": 74.0,
        "cut": 2,
    }
    s = uf.summarize(res)
    assert s["seconds_per_verdict"] == 37.0 and s["projected_seconds_per_verdict"] == round((74 + 14) / 4, 2)
    kbench = {"summary": {"seconds_per_verdict": 11.0}, "cold": {"verdicts": [{"tag": 0, "status": "ok"}]}}
    assert uf.side_by_side(res, kbench)["speedup"] == 2.0  # against the projection, not the cut figure


def test_the_first_solutions_each_in_several_extensions_make_the_batch_both_flows_judge() -> None:
    from throughput import batch

    jobs = batch(3, 0, "cuda", solutions=2)
    problems = [j.problem.key for j in jobs]
    assert len(jobs) == 6 and len(set(problems)) == 2
    assert problems[:2] == problems[2:4] == problems[4:]  # variant 0 of every solution first
    for key in set(problems):
        sources = [j.candidate.source for j in jobs if j.problem.key == key]
        assert len(set(sources)) == 3  # each candidate its own extension: no build is a cache hit
    assert batch(3, 0, "cuda")[:2] == jobs[:2] and len(batch(3, 4, "cuda", solutions=2)) == 4
