"""benchmarks/vs_upstream.py: the goals judged from its three parts, and a part that hangs is ended."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import vs_upstream as vs  # noqa: E402


def _cold(problem: str, mib: float, kbench_s: float, upstream_s: float, status: str = "ok") -> dict[str, Any]:
    return {
        "problem": problem,
        "output_mib": mib,
        "kbench": {"wall_s": kbench_s, "status": status, "phases": {"cli": 1.0}, "accounted": 0.98},
        "upstream": {"wall_s": upstream_s, "correct": True},
        "ratio": round(kbench_s / upstream_s, 2),
    }


def _latency(n_cold: int, cold_ratio: float) -> dict[str, Any]:
    return {
        "args": {},
        "env": {},
        "cold": [_cold(f"2/{i}", 32.0, 7.0 * cold_ratio, 7.0) for i in range(n_cold)],
        "big": [_cold("2/25", 1024.0, 9.0, 16.0)],
        "warm": [
            {
                "problem": "2/1",
                "output_mib": 32.0,
                "cold_s": 8.0,
                "warm_s": [2.0, 2.9],
                "statuses": ["ok"] * 3,
            },
            {"problem": "2/25", "output_mib": 1024.0, "cold_s": 9.0, "warm_s": [8.5], "statuses": ["ok"] * 2},
        ],
        "left_out": [],
    }


def _throughput(statuses: list[str], spv: float) -> dict[str, Any]:
    verdicts = [
        {"tag": i, "status": s, "phases": {"ref": 1.0, "cand": 1.5, "cand:timing": 0.5}}
        for i, s in enumerate(statuses)
    ]
    summary = {
        "candidates": len(statuses),
        "verdicts": len(statuses),
        "wall_s": spv * len(statuses),
        "seconds_per_verdict": spv,
        "statuses": {"ok": statuses.count("ok")},
        "first_verdict_s": 10.0,
        "all_built_s": 30.0,
        "cold_build_s": {"median": 9.0},
        "while_building": {"cpu_busy": 0.9, "lease_held": 0.6},
        "after_builds": {"cpu_busy": 0.4, "lease_held": 0.97},
    }
    return {"summary": summary, "cold": {"verdicts": verdicts}}


def _upstream(correct: list[bool], eval_s: float, cut: int = 0) -> dict[str, Any]:
    evals = [{"tag": i, "correct": c, "wall_s": eval_s} for i, c in enumerate(correct)]
    n = len(correct) + cut
    return {
        "builds": [{"tag": i, "wall_s": 60.0} for i in range(n)],
        "evals": evals,
        "built_at_s": 100.0,
        "wall_s": 100.0 + eval_s * len(correct),
        "cut": cut,
    }


def _by_key(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["key"]: r for r in rows}


def test_every_goal_is_judged_from_the_parts() -> None:
    parts = {
        "latency": _latency(10, 0.9),
        "throughput": _throughput(["ok"] * 4, 2.5),
        "upstream": _upstream([True] * 4, 10.0),
    }
    g = _by_key(vs.goals(parts))
    assert (g["cold_ratio"]["ratio"], g["cold_ratio"]["met"]) == (0.9, True)
    assert (g["cold_1gib_ratio"]["ratio"], g["cold_1gib_ratio"]["met"]) == (0.56, True)
    assert (g["warm_max_s"]["value"], g["warm_max_s"]["met"]) == (2.9, True)
    assert (g["warm_1gib_max_s"]["value"], g["warm_1gib_max_s"]["met"]) == (8.5, False)  # over 8 s
    assert g["seconds_per_verdict"]["met"] is True
    # upstream: 100 s of builds + 4 x 10 s over 4 verdicts = 35 s each, 14x kbench's 2.5 s
    tp = g["speedup_vs_upstream"]
    assert (tp["upstream"], tp["ratio"], tp["met"]) == (35.0, 14.0, True)
    assert (g["verdicts_that_differ"]["value"], g["verdicts_that_differ"]["met"]) == (0, True)
    m = vs.metrics(list(g.values()))
    assert (m["cold_ratio"], m["speedup_vs_upstream"], m["goals_met"], m["goals"]) == (0.9, 14.0, 6, 7)


def test_a_batch_of_several_candidates_per_problem_is_named_as_such() -> None:
    one = _throughput(["ok"] * 4, 2.5)
    g = _by_key(vs.goals({"latency": None, "throughput": one, "upstream": None}))
    assert "4 distinct level-2 candidates" in g["seconds_per_verdict"]["goal"]
    three = _throughput(["ok"] * 6, 2.5)
    three["summary"]["problems"] = 2
    g = _by_key(vs.goals({"latency": None, "throughput": three, "upstream": None}))
    assert "6 level-2 candidates of 2 problems" in g["seconds_per_verdict"]["goal"]


def test_both_flows_get_the_same_batch() -> None:
    args = argparse.Namespace(
        out=Path("OUT"), cold="2/1", big="", warm="", latency_backend="triton", device="cuda",
        latency_seconds=1.0, throughput_seconds=1.0, upstream_seconds=1.0, limit=0, slots=3,
        builders=0, upstream_builders=16, variants=3, solutions=36,
    )  # fmt: skip
    commands = vs.part_commands(args)
    for part in ("throughput", "upstream"):
        cmd = commands[part]
        given = {cmd[i]: cmd[i + 1] for i in range(len(cmd) - 1) if cmd[i].startswith("--")}
        assert (given["--variants"], given["--solutions"], given["--limit"]) == ("3", "36", "0")


def test_the_upstream_flow_can_take_a_prefix_of_the_batch_never_more() -> None:
    def upstream_given(limit: int, upstream_limit: int) -> str:
        args = argparse.Namespace(
            out=Path("OUT"), cold="", big="", warm="", latency_backend="triton", device="cuda",
            latency_seconds=1.0, throughput_seconds=1.0, upstream_seconds=1.0, limit=limit, slots=3,
            builders=0, upstream_builders=16, variants=3, solutions=36, upstream_limit=upstream_limit,
        )  # fmt: skip
        commands = vs.part_commands(args)
        assert commands["throughput"][commands["throughput"].index("--limit") + 1] == str(limit)
        cmd = commands["upstream"]
        return cmd[cmd.index("--limit") + 1]

    assert upstream_given(0, 48) == "48"  # kbench: all 108; upstream: the first 48
    assert upstream_given(0, 0) == "0" and upstream_given(24, 0) == "24"  # the same batch
    assert upstream_given(24, 48) == "24"  # never more than kbench's


def test_an_upstream_flow_on_a_prefix_is_named_as_such() -> None:
    tp = _throughput(["ok"] * 6, 2.0)
    tp["summary"]["problems"] = 2
    parts = {"latency": None, "throughput": tp, "upstream": _upstream([True, True], 6.0, cut=2)}
    g = _by_key(vs.goals(parts))["speedup_vs_upstream"]
    # 4 of the 6 files: 2 evaluated, 2 left; (112 s + 2 x 6 s) / 4 = 31 s per verdict
    assert "projected from 2 of 4, the first 4 of the same 6 files" in g["goal"]
    assert (g["upstream"], g["ratio"]) == (31.0, 15.5)
    same = _by_key(vs.goals({**parts, "upstream": _upstream([True] * 4, 6.0, cut=2)}))
    assert "the same" not in same["speedup_vs_upstream"]["goal"]  # 6 of 6: the whole batch


def test_a_cold_median_over_too_few_problems_is_not_met() -> None:
    g = _by_key(vs.goals({"latency": _latency(9, 0.8), "throughput": None, "upstream": None}))
    assert g["cold_ratio"]["ratio"] == 0.8 and g["cold_ratio"]["met"] is False
    assert g["seconds_per_verdict"]["met"] is None  # the part did not run: not judged either way
    assert "speedup_vs_upstream" not in g


def test_a_projected_upstream_flow_and_a_differing_verdict_are_named() -> None:
    parts = {
        "latency": None,
        "throughput": _throughput(["ok", "mismatch", "ok"], 4.0),
        "upstream": _upstream([True, True], 6.0, cut=1),
    }
    g = _by_key(vs.goals(parts))
    tp = g["speedup_vs_upstream"]
    # cut after 2 of 3: (112 s + 1 x 6 s) / 3 = 39.33 s per verdict
    assert "projected from 2 of 3" in tp["goal"] and tp["upstream"] == 39.33 and tp["met"] is True
    assert g["seconds_per_verdict"]["met"] is False  # 4 s > 3.2 s
    differ = g["verdicts_that_differ"]
    assert differ["met"] is False and differ["differ"] == [
        {"tag": 1, "kbench": "mismatch", "upstream_correct": True}
    ]
    assert g["cold_ratio"]["met"] is None


def test_the_report_has_the_goals_the_phases_and_the_parts_that_failed() -> None:
    parts = {"latency": _latency(10, 1.2), "throughput": _throughput(["ok"] * 2, 3.0), "upstream": None}
    result = {
        "env": {"kbench": "0.1.0"},
        "parts": parts,
        "goals": vs.goals(parts),
        "ran": {"upstream": {"exit": None, "seconds": 540.0}},
    }
    text = vs.report(result)
    assert (
        "| 1. cold latency, outputs <= 256 MiB (median of 10 problems) | <= 1.0x upstream over >= 10 problems"
        in text
    )
    assert "| 1.2 | **no** |" in text
    assert "Part `upstream` was killed at its time limit after 540.0 s" in text
    assert "## Latency: Cold latency" in text and "| cand:timing | 0.5 | 2 |" in text
    assert "| after the last build | 0.4 | 0.97 |" in text


def _alive(pid: int) -> bool:
    """Running, not a zombie (where PID 1 reaps nothing, a killed orphan stays one)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def test_a_part_past_its_limit_is_ended_with_what_it_started(tmp_path: Path) -> None:
    marker = tmp_path / "child.pid"
    script = f"import os, subprocess, time; p = subprocess.Popen(['sleep', '60']); open({str(marker)!r}, 'w').write(str(p.pid)); time.sleep(60)"
    t0 = time.monotonic()
    info = vs.run_part("slow", [sys.executable, "-c", script], tmp_path / "slow", limit_s=2.0)
    assert info["exit"] is None and time.monotonic() - t0 < 20
    child = int(marker.read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if not _alive(child):
            break
        time.sleep(0.05)
    else:
        raise AssertionError("the part's child outlived it")
    done = vs.run_part("quick", [sys.executable, "-c", "print('fine')"], tmp_path / "quick", limit_s=30.0)
    assert done["exit"] == 0 and (tmp_path / "quick" / "log.txt").read_text() == "fine\n"
    named = vs.run_part("named", [sys.executable, "-c", "pass", "--out", str(tmp_path)], tmp_path / "n", 30.0)
    assert named["command"] == "python -c pass --out OUT"  # no folder of the machine it ran on


def test_why_each_timing_loop_stopped_is_counted_and_reported() -> None:
    """A reference loop that ran to its budget held the lease for all of it: the throughput part counts
    each timed callable's loops by why they stopped, from the verdicts' stats, and the report shows it."""
    import throughput

    from kbench.types import LoopFacts, Status, TimingStats, Verdict

    def stats(stop: str) -> TimingStats:
        return TimingStats(2.0, 2.0, 0.01, 0.01, 1.9, 100, 0.001, "cuda", loop=LoopFacts(stop=stop))

    v = Verdict(Status.OK, "kbench:2/1", "cuda", "full", "fp32", "cuda", timing=stats("rse"))
    held = Verdict(
        Status.OK, "kbench:2/2", "cuda", "full", "fp32", "cuda",
        timing=stats("fenced"), baselines=(("eager", stats("budget")),),
    )  # fmt: skip
    rows = [{"timing_stops": throughput.timing_stops(x)} for x in (v, held)]
    assert rows[1]["timing_stops"] == {"candidate": "fenced", "eager": "budget"}
    counts = throughput.stop_counts(rows)
    assert counts == {"candidate": {"fenced": 1, "rse": 1}, "eager": {"budget": 1}}
    parts = {"latency": None, "throughput": _throughput(["ok"] * 2, 3.0), "upstream": None}
    parts["throughput"]["summary"]["timing_stops"] = counts
    text = vs.report({"env": {}, "parts": parts, "goals": vs.goals(parts), "ran": {}})
    assert '| eager | {"budget": 1} |' in text and '| candidate | {"fenced": 1, "rse": 1} |' in text


def _env(fingerprint: str) -> dict[str, Any]:
    return {"kbench": "0.1.0", "python": "3.12.3", "torch": "2.11.0+cu130", "triton": "3.6.0", "cuda": "13.0",
            "driver": "580.159.04", "cpu": "Xeon", "cpu_count": 16, "gpu": "NVIDIA H200", "gpu_count": 1,
            "fingerprint": fingerprint}  # fmt: skip


def test_the_report_takes_machine_commit_and_date_from_the_parts_not_from_where_it_is_written() -> None:
    import common

    tp, up = _throughput(["ok"] * 2, 2.0), _upstream([True, True], 6.0)
    tp["env"], up["env"] = _env("aaa"), _env("aaa")
    ran = {
        "throughput": {
            "exit": 0,
            "seconds": 300.0,
            "commit": "1111111",
            "ended": "2026-12-04T05:20:00+00:00",
        },
        "upstream": {"exit": 0, "seconds": 400.0, "commit": "2222222", "ended": "2026-12-04T05:30:00+00:00"},
    }
    where = vs.measured_on({"latency": None, "throughput": tp, "upstream": up}, ran)
    assert where["env"]["gpu"] == "NVIDIA H200" and where["machines"] == {}
    assert (where["commit"], where["date"]) == ("2222222", "2026-12-04T05:30:00+00:00")  # the last part run
    header = common.record_env(where["env"], where["commit"])
    assert header["hardware"] == "h200" and header["machine"] == "Xeon x 16, 1x NVIDIA H200"
    assert header["kbench"] == {"version": "0.1.0", "commit": "2222222"}
    assert header["versions"]["torch"] == "2.11.0+cu130"
    # parts from older runs name no end: the report is dated when it is written
    assert vs.measured_on({"latency": None, "throughput": tp, "upstream": None}, {})["date"] is None


def test_parts_measured_on_different_machines_are_named_in_the_report() -> None:
    tp, up = _throughput(["ok"] * 2, 2.0), _upstream([True, True], 6.0)
    tp["env"], up["env"] = _env("aaa"), _env("bbb")
    parts = {"latency": None, "throughput": tp, "upstream": up}
    where = vs.measured_on(parts, {})
    assert where["machines"] == {"throughput": "aaa (Xeon x 16)", "upstream": "bbb (Xeon x 16)"}
    result = {
        "env": where["env"],
        "parts": parts,
        "goals": vs.goals(parts),
        "ran": {},
        "machines": where["machines"],
    }
    text = vs.report(result)
    assert (
        "**The parts ran on different machines** (fingerprints: throughput aaa (Xeon x 16), upstream bbb"
        in text
    )
    same = vs.report({**result, "machines": {}})
    assert "different machines" not in same


def test_parts_whose_files_carry_no_fingerprint_are_compared_by_their_facts() -> None:
    """A part's file holds kbench.hardware.environment(), which has no fingerprint: it is worked out."""
    from kbench.hardware import fingerprint

    tp, up = _throughput(["ok"] * 2, 2.0), _upstream([True, True], 6.0)
    tp["env"], up["env"] = _env(""), _env("")
    del tp["env"]["fingerprint"]
    parts = {"latency": None, "throughput": tp, "upstream": up}
    assert vs.measured_on(parts, {})["machines"] == {}  # the same facts: side by side
    up["env"] = {**up["env"], "gpu": "NVIDIA H100"}
    machines = vs.measured_on(parts, {})["machines"]
    assert (
        machines["upstream"].startswith(fingerprint(up["env"]))
        and machines["throughput"] != machines["upstream"]
    )
    up["env"] = {**tp["env"], "cpu_count": 32}  # same GPU and versions, other cores: builds differ
    assert vs.measured_on(parts, {})["machines"]["upstream"].endswith("(Xeon x 32)")


def test_a_report_joined_from_separate_calls_names_each_call() -> None:
    one, two = (
        "python benchmarks/vs_upstream.py --only throughput",
        "python benchmarks/vs_upstream.py --only upstream",
    )
    ran = {
        "upstream": {"exit": 0, "call": two, "ended": "2026-12-04T05:30:00+00:00"},
        "throughput": {"exit": 0, "call": one, "ended": "2026-12-04T05:20:00+00:00"},
    }
    again = "python benchmarks/vs_upstream.py --report-only"
    assert vs.joined_command(ran, again) == f"{one}; {two}; {again}"
    full = "python benchmarks/vs_upstream.py"
    whole = {
        k: {"exit": 0, "call": full, "ended": f"2026-12-04T05:2{i}:00+00:00"} for i, k in enumerate(vs.PARTS)
    }
    assert vs.joined_command(whole, full) == full  # one call ran them all
    assert vs.joined_command({"latency": {"exit": 0}}, again) == again  # parts from before calls were kept


def test_the_upstream_flow_with_bytecode_is_shown_beside_the_goal_and_not_counted_as_one() -> None:
    lat = _latency(10, 0.6)
    for row in lat["cold"]:  # upstream 7.0 s as the machine runs it, 4.2 s reading bytecode
        row["upstream_bytecode"] = {"wall_s": 4.2, "correct": True}
        row["ratio_bytecode"] = round(row["kbench"]["wall_s"] / 4.2, 2)
    rows = vs.goals({"latency": lat, "throughput": None, "upstream": None})
    g = _by_key(rows)
    assert (g["cold_ratio"]["ratio"], g["cold_ratio"]["met"]) == (0.6, True)
    even = g["cold_ratio_bytecode"]
    assert (even["kbench"], even["upstream"], even["ratio"], even["met"]) == (4.2, 4.2, 1.0, None)
    m = vs.metrics(rows)
    assert m["cold_ratio_bytecode"] == 1.0 and m["goals"] == len(rows) - 1
    # records of earlier runs timed the upstream flow one way: no such row
    assert "cold_ratio_bytecode" not in _by_key(vs.goals({"latency": _latency(10, 0.9)}))
