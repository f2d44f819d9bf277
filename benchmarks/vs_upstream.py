"""kbench against the upstream flow in one call: cold latency, warm latency and throughput, goal by goal.

    python benchmarks/vs_upstream.py --out OUT [--record]
    python benchmarks/vs_upstream.py --out OUT --report-only       # the report again from OUT's parts
    python benchmarks/vs_upstream.py --out OUT --only throughput,upstream --solutions 36 --variants 3 --limit 0 \
        --upstream-limit 48        # the 108-candidate batch: three candidates per problem

Three parts run one after the other, each a benchmark script in its own process, into OUT/<part>:

1. `latency` (verdict_speed.py): `kbench eval` in a fresh process against the upstream flow's fresh
   process on the same candidate, for `--cold` problems (outputs up to 256 MiB) and `--big` ones (~1 GiB),
   then warm verdicts (the reference kept, in one process) for `--warm` problems;
2. `throughput` (throughput.py): the first `--limit` candidates of the shipped level-2 CUDA solutions
   (`--solutions N`: of the first N; `--variants K`: K candidates per solution), each its own extension,
   cold caches, through kbench's local executor (CPU builders, GPU lanes);
3. `upstream` (upstream_flow.py): the same files through the upstream flow: `--upstream-builders` plain
   load_inline builds at once, then one fresh process per candidate, one after the other
   (`--upstream-limit N`: the first N of them, for a batch whose builds alone outlast the part's limit).

Each part has a time limit (`--latency-seconds`, `--throughput-seconds`, `--upstream-seconds`): it starts
nothing past it and reports what finished; the upstream flow, cut after its builds, projects its whole
batch from its mean evaluation time. A part that fails or hangs (killed `--grace` seconds past its limit)
is named in the report and the others still run.

OUT/vs_upstream.json and OUT/vs_upstream.md then hold one table of the goals (target, kbench, upstream,
their ratio, met or not) and where the seconds went: each cold verdict's phases, the warm verdicts, the
throughput run's phases per verdict, its CPU and device-lease shares, and the upstream flow's build and
evaluation times. `--record` files the report under benchmarks/results/<hardware>/vs-upstream.jsonl with
the three parts' JSON files.

A call keeps the parts an earlier call ran into the same OUT (OUT/ran.json), so the parts can run in
separate calls (`--only throughput`, then `--only upstream`) and `--report-only` joins them anywhere: the
report and its record take the machine, commit and date from the parts' own files, and say so when the
parts name different machines.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import common
from common import BENCHMARKS

COLD = "2/1,2/3,2/7,2/13,2/17,2/23,2/29,2/30,2/33,2/35"
BIG = "2/25,2/36"
WARM = "2/1,2/23,2/25"
SMALL_MIB = 256.0  # the cold and warm goals for outputs up to this size; larger ones have their own
MIN_COLD = 10  # the cold goal is a median over at least this many problems
PARTS = ("latency", "throughput", "upstream")
FILES = {"latency": "verdict_speed.json", "throughput": "throughput.json", "upstream": "upstream_flow.json"}


def upstream_limit(args: argparse.Namespace) -> int:
    """The upstream flow's share of the batch: its first `--upstream-limit` candidates, never more than
    kbench's (`--limit`, 0: all). The batch lists variant 0 of every solution first, so a prefix spans
    every problem before it repeats one."""
    mine, theirs = args.limit, getattr(args, "upstream_limit", 0)
    if not theirs:
        return mine
    return min(mine, theirs) if mine else theirs


def part_commands(args: argparse.Namespace) -> dict[str, list[str]]:
    py = [sys.executable]
    latency = [
        *py, str(BENCHMARKS / "verdict_speed.py"), "--out", str(args.out / "latency"),
        "--cold", args.cold, "--big", args.big, "--warm", args.warm, "--backend", args.latency_backend,
        "--device", args.device, "--max-seconds", f"{args.latency_seconds:g}",
    ]  # fmt: skip
    if args.device == "cpu":
        latency += ["--preset", "small"]
    throughput = [
        *py, str(BENCHMARKS / "throughput.py"), "--out", str(args.out / "throughput"),
        "--variants", str(args.variants), "--solutions", str(args.solutions), "--limit", str(args.limit), "--slots", str(args.slots), "--builders", str(args.builders),
        "--warm", "0", "--device", args.device, "--max-seconds", f"{args.throughput_seconds:g}",
    ]  # fmt: skip
    upstream = [
        *py, str(BENCHMARKS / "upstream_flow.py"), "--out", str(args.out / "upstream"),
        "--variants", str(args.variants), "--solutions", str(args.solutions), "--limit", str(upstream_limit(args)), "--builders", str(args.upstream_builders), "--device", args.device,
        "--max-seconds", f"{args.upstream_seconds:g}",
    ]  # fmt: skip
    return {"latency": latency, "throughput": throughput, "upstream": upstream}


def run_part(name: str, cmd: list[str], folder: Path, limit_s: float) -> dict[str, Any]:
    """Run one part into `folder` (its output in folder/log.txt), killed `limit_s` after its start."""
    folder.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    with (folder / "log.txt").open("w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            code: int | None = proc.wait(timeout=limit_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)  # the part's whole session: its workers and builders too
            proc.wait()
            code = None
    seconds = round(time.monotonic() - t0, 1)
    print(
        f"{name}: {'killed at its limit' if code is None else f'exit {code}'} after {seconds} s", flush=True
    )
    return {"command": common.command_line(cmd[1:]), "exit": code, "seconds": seconds}


def load_parts(out: Path) -> dict[str, dict[str, Any] | None]:
    found: dict[str, dict[str, Any] | None] = {}
    for name in PARTS:
        path = out / name / FILES[name]
        try:
            found[name] = json.loads(path.read_text())
        except (OSError, ValueError):
            found[name] = None
    return found


def _median(xs: list[float]) -> float | None:
    return round(statistics.median(xs), 2) if xs else None


def _cold_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The problems both flows judged: kbench gave a verdict, the upstream process a time."""
    return [r for r in rows if r["kbench"].get("status") and r["upstream"].get("wall_s") and r.get("ratio")]


def _cold_goal(
    key: str,
    goal: str,
    target: str,
    rows: list[dict[str, Any]],
    limit: float | None,
    least: int = 0,
    flow: str = "upstream",
) -> dict[str, Any]:
    """A cold-latency goal over `rows`: kbench against `flow` (`upstream`, or `upstream_bytecode` with its
    own ratio), met when the median ratio is at most `limit` over at least `least` problems; without a
    limit the row is informative, shown beside the goals and not counted among them (`metrics`)."""
    ratio_key = "ratio" + flow.removeprefix("upstream")
    ratio = _median([r[ratio_key] for r in rows])
    row = {
        "key": key,
        "goal": goal,
        "target": target,
        "kbench": _median([r["kbench"]["wall_s"] for r in rows]),
        "upstream": _median([r[flow]["wall_s"] for r in rows]),
        "ratio": ratio,
        "met": None if ratio is None or limit is None else ratio <= limit and len(rows) >= least,
    }
    if limit is None:
        row["informative"] = True
    return row


def goals(parts: dict[str, dict[str, Any] | None]) -> list[dict[str, Any]]:
    """One row per goal: what was measured of each flow, the ratio, the target and whether it was met
    (None where the part did not run or measured too little)."""
    rows: list[dict[str, Any]] = []
    lat = parts.get("latency") or {}
    cold = _cold_rows(lat.get("cold") or [])
    small = [r for r in cold if r["output_mib"] <= SMALL_MIB]
    goal = f"1. cold latency, outputs <= {SMALL_MIB:g} MiB (median of {len(small)} problems)"
    rows.append(
        _cold_goal("cold_ratio", goal, f"<= 1.0x upstream over >= {MIN_COLD} problems", small, 1.0, MIN_COLD)
    )
    even = [r for r in small if r.get("ratio_bytecode")]
    if even:  # records before the bytecode folder timed the upstream flow one way only
        goal = f"1. the same, the upstream flow with a bytecode folder too (median of {len(even)} problems)"
        target = "(equal terms: both flows read compiled bytecode)"
        rows.append(_cold_goal("cold_ratio_bytecode", goal, target, even, None, flow="upstream_bytecode"))
    big = [r for r in _cold_rows(lat.get("big") or []) if r["output_mib"] > SMALL_MIB]
    goal = f"1. cold latency, outputs ~1 GiB (median of {len(big)} problems)"
    rows.append(_cold_goal("cold_1gib_ratio", goal, "<= 1.5x upstream", big, 1.5))
    warm = lat.get("warm") or []
    for key, label, keep, limit in (
        ("warm_max_s", f"<= {SMALL_MIB:g} MiB", lambda mib: mib <= SMALL_MIB, 3.0),
        ("warm_1gib_max_s", "~1 GiB", lambda mib: mib > SMALL_MIB, 8.0),
    ):
        secs = [s for r in warm if keep(r["output_mib"]) for s in r["warm_s"]]
        ok = all(s == "ok" for r in warm if keep(r["output_mib"]) for s in r["statuses"])
        rows.append({
            "key": key,
            "value": max(secs) if secs else None,
            "goal": f"2. warm latency, outputs {label} ({len(secs)} verdicts; median, max)",
            "target": f"<= {limit:g} s each",
            "kbench": f"{_median(secs)}, {max(secs):.2f}" if secs else None,
            "upstream": None,
            "ratio": None,
            "met": None if not secs else max(secs) <= limit and ok,
        })  # fmt: skip
    tp, up = parts.get("throughput"), parts.get("upstream")
    summary = (tp or {}).get("summary", {})
    k_spv = summary.get("seconds_per_verdict")
    verdicts = summary.get("verdicts", 0)
    # records before the summary counted problems had one candidate per problem (--variants 1)
    problems = summary.get("problems", verdicts)
    batch = (
        f"{verdicts} distinct level-2 candidates"
        if problems == verdicts
        else f"{verdicts} level-2 candidates of {problems} problems"
    )
    rows.append({
        "key": "seconds_per_verdict",
        "goal": f"3. throughput, {batch}, cold caches (s per verdict)",
        "target": "<= 3.2 s",
        "kbench": k_spv,
        "upstream": None,
        "ratio": None,
        "met": None if k_spv is None else k_spv <= 3.2,
    })  # fmt: skip
    if tp and up:
        from upstream_flow import side_by_side, summarize

        both = side_by_side(up, tp)
        s = summarize(up)
        theirs = s["candidates"] + s["not_evaluated_after_max_seconds"]
        how = (
            f"projected from {s['candidates']} of {theirs}"
            if s["projected_seconds_per_verdict"]
            else f"{s['candidates']} measured"
        )
        batch_size = summary.get("candidates", verdicts)
        if theirs < batch_size:  # --upstream-limit: the flow ran on a prefix of the same files
            how += f", the first {theirs} of the same {batch_size} files"
        rows.append({
            "key": "speedup_vs_upstream",
            "goal": f"3. throughput against the upstream flow (s per verdict; upstream {how})",
            "target": ">= 5x",
            "kbench": both["kbench_seconds_per_verdict"],
            "upstream": both["upstream_seconds_per_verdict"],
            "ratio": both["speedup"],
            "met": None if both["speedup"] is None else both["speedup"] >= 5.0,
        })  # fmt: skip
        rows.append({
            "key": "verdicts_that_differ",
            "value": len(both["verdicts_that_differ"]),
            "goal": f"4. same verdicts: candidates both flows judged ({both['candidates_judged_by_both']})",
            "target": "no candidate judged differently",
            "kbench": None,
            "upstream": None,
            "ratio": None,
            "met": not both["verdicts_that_differ"] if both["candidates_judged_by_both"] else None,
            "differ": both["verdicts_that_differ"],
        })  # fmt: skip
    return rows


def per_verdict_phases(verdicts: list[dict[str, Any]]) -> list[tuple[str, float, int]]:
    """(phase, mean seconds per verdict that had it, verdicts) over a throughput run's verdicts."""
    from throughput import phase_values

    sums = phase_values(verdicts)
    top = sorted(k for k in sums if ":" not in k)
    nested = sorted(k for k in sums if ":" in k)
    return [(k, round(statistics.fmean(sums[k]), 3), len(sums[k])) for k in top + nested]


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "**no**"
    return str(v)


def report(result: dict[str, Any]) -> str:
    env, parts, ran = result["env"], result["parts"], result.get("ran", {})
    date = result.get("date") or common.utc_now()
    lines = [
        f"# kbench against the upstream flow: latency and throughput ({date})",
        "",
        f"kbench {env.get('kbench')}, torch {env.get('torch')}, triton {env.get('triton')}, python "
        f"{env.get('python')}, {env.get('cpu')} x {env.get('cpu_count')}, gpu {env.get('gpu')}, driver "
        f"{env.get('driver')}",
        "",
        f"`{result.get('command', 'python benchmarks/vs_upstream.py')}`",
        "",
    ]
    if result.get("machines"):
        named = ", ".join(f"{k} {v}" for k, v in result["machines"].items())
        lines += [
            f"**The parts ran on different machines** (fingerprints: {named}): their figures are not side "
            "by side, and no goal against the upstream flow should be read from them.",
            "",
        ]
    lines += [
        "## Goals",
        "",
        "| goal | target | kbench | upstream | kbench / upstream | met |",
        "|---|---|---|---|---|---|",
    ]
    for g in result["goals"]:
        ratio = g["ratio"]
        lines.append(
            f"| {g['goal']} | {g['target']} | {_cell(g['kbench'])} | {_cell(g['upstream'])} | "
            f"{_cell(ratio)} | {_cell(g['met'])} |"
        )
    lines.append("")
    for name in PARTS:
        info = ran.get(name)
        if info is not None and info["exit"] != 0:
            how = "was killed at its time limit" if info["exit"] is None else f"exited with {info['exit']}"
            lines += [f"Part `{name}` {how} after {info['seconds']} s; see {name}/log.txt.", ""]
        elif parts.get(name) is None:
            lines += [f"Part `{name}`: no results (not run).", ""]
    lat = parts.get("latency")
    if lat:
        import verdict_speed

        speed = verdict_speed.report(lat).split("\n")
        # its own tables (the title and machine line are this report's)
        start = next((i for i, ln in enumerate(speed) if ln.startswith("## ")), len(speed))
        lines += [
            ln.replace("## ", "## Latency: ", 1) if ln.startswith("## ") else ln for ln in speed[start:]
        ]
    tp = parts.get("throughput")
    if tp:
        s = tp["summary"]
        lines += [
            "## Throughput: where a verdict's seconds went",
            "",
            f"{s['verdicts']} verdicts of {s['candidates']} candidates in {s['wall_s']} s "
            f"({s['seconds_per_verdict']} s per verdict), statuses {json.dumps(s['statuses'])}; the first "
            f"verdict after {round(s['first_verdict_s'] or 0, 1)} s, every build done after "
            f"{s.get('all_built_s')} s (cold build median {(s.get('cold_build_s') or {}).get('median')} s).",
            "",
            "| while | CPUs busy | GPU lease held |",
            "|---|---|---|",
        ]
        for label, key in (("builds ran", "while_building"), ("after the last build", "after_builds")):
            sh = s.get(key) or {}
            lines.append(f"| {label} | {_cell(sh.get('cpu_busy'))} | {_cell(sh.get('lease_held'))} |")
        lines += ["", "| phase | s per verdict | verdicts |", "|---|---|---|"]
        lines += [f"| {k} | {x} | {n} |" for k, x, n in per_verdict_phases(tp["cold"]["verdicts"])]
        stops = s.get("timing_stops")
        if stops:  # a loop stopped by its budget held the lease for all of it
            lines += ["", "| timing loop | stopped by (verdicts) |", "|---|---|"]
            lines += [f"| {name} | {json.dumps(counts)} |" for name, counts in stops.items()]
        lines.append("")
    up = parts.get("upstream")
    if up:
        from upstream_flow import summarize

        us = summarize(up)
        lines += ["## The upstream flow", "", "| measure | value |", "|---|---|"]
        lines += [f"| {k} | {json.dumps(v) if isinstance(v, dict) else _cell(v)} |" for k, v in us.items()]
        lines.append("")
    return "\n".join(lines) + "\n"


def joined_command(ran: dict[str, Any], this_call: str) -> str:
    """The calls behind a report: each call that ran one of its parts, in the order they ended, then
    this one where it ran none of them (`--report-only`)."""
    calls = [i["call"] for i in sorted(ran.values(), key=lambda i: i.get("ended", "")) if "call" in i]
    return "; ".join(dict.fromkeys([*calls, this_call]))


def machine_print(env: dict[str, Any]) -> str:
    """A part's machine as the report compares them: kbench's fingerprint of its timing fields (computed
    from the facts when the part's file does not carry it, as `kbench.hardware.environment` does not),
    then its CPU and core count, which set the pace of the builds."""
    from kbench.hardware import fingerprint

    return f"{env.get('fingerprint') or fingerprint(env)} ({env.get('cpu')} x {env.get('cpu_count')})"


def measured_on(parts: dict[str, dict[str, Any] | None], ran: dict[str, Any]) -> dict[str, Any]:
    """Where and when the parts were measured, from their own files, not from the machine that writes the
    report: the first part's machine facts, the commit and end of the last part run, and each part's
    machine fingerprint where the parts name more than one (their figures are then not side by side)."""
    envs = {name: p["env"] for name in PARTS if (p := parts.get(name)) and p.get("env")}
    prints = {name: machine_print(env) for name, env in envs.items()}
    last: dict[str, Any] = max(
        (info for info in ran.values() if info.get("ended")), key=lambda i: i["ended"], default={}
    )
    return {
        "env": next(iter(envs.values()), None),
        "machines": prints if len(set(prints.values())) > 1 else {},
        "commit": last.get("commit"),
        "date": last.get("ended"),
    }


def metrics(goal_rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Each goal's headline number (its ratio, else its own value, else kbench's) by key."""
    out: dict[str, Any] = {}
    for g in goal_rows:
        value = g.get("value", g["ratio"] if g["ratio"] is not None else g["kbench"])
        if value is not None:
            out[g["key"]] = value
    out["goals_met"] = sum(g["met"] is True for g in goal_rows)
    out["goals"] = sum(not g.get("informative") for g in goal_rows)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--only", default=",".join(PARTS), help="the parts to run, comma-separated")
    ap.add_argument("--report-only", action="store_true", help="no part runs: the report from OUT's parts")
    ap.add_argument("--cold", default=COLD)
    ap.add_argument("--big", default=BIG)
    ap.add_argument("--warm", default=WARM)
    ap.add_argument(
        "--latency-backend", default="triton", help="the shipped solutions the latency part judges"
    )
    ap.add_argument("--limit", type=int, default=48, help="throughput: the first N candidates of the batch")
    ap.add_argument(
        "--variants", type=int, default=1, help="throughput: candidates per solution, each its own extension"
    )
    ap.add_argument(
        "--solutions", type=int, default=0, help="throughput: the first N shipped solutions (0: all)"
    )
    ap.add_argument("--slots", type=int, default=3)
    ap.add_argument("--builders", type=int, default=0, help="kbench's CPU builders (0: its default)")
    ap.add_argument(
        "--upstream-limit",
        type=int,
        default=0,
        help="the upstream flow: the first N candidates of kbench's batch (0: the same as --limit); its "
        "builds all run before any evaluation, so a batch larger than its time limit evaluates nothing",
    )
    ap.add_argument("--upstream-builders", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--latency-seconds", type=float, default=420.0)
    ap.add_argument("--throughput-seconds", type=float, default=240.0)
    ap.add_argument("--upstream-seconds", type=float, default=360.0)
    ap.add_argument("--grace", type=float, default=180.0, help="a part is killed this long past its limit")
    ap.add_argument("--device", default="cuda", help="cpu: a dry run (cpp solutions, small preset)")
    common.add_record_argument(ap)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.device == "cpu" and args.latency_backend == "triton":
        args.latency_backend = "cpp"
    # parts an earlier call ran into OUT stay: each call adds the ones it runs (a device call too short
    # for all three runs them one call at a time, and --report-only joins them)
    ran_path = args.out / "ran.json"
    ran = json.loads(ran_path.read_text()) if ran_path.exists() else {}
    result: dict[str, Any] = {"command": common.command_line(), "ran": ran}
    if not args.report_only:
        commands = part_commands(args)
        limits = {"latency": args.latency_seconds, "throughput": args.throughput_seconds,
                  "upstream": args.upstream_seconds}  # fmt: skip
        for name in [p for p in PARTS if p in args.only.split(",")]:
            ran[name] = run_part(name, commands[name], args.out / name, limits[name] + args.grace)
            ran[name] |= {"call": result["command"], "commit": common.commit(), "ended": common.utc_now()}
            ran_path.write_text(json.dumps(ran, indent=1))
    result["parts"] = load_parts(args.out)
    result["command"] = joined_command(ran, result["command"])
    where = measured_on(result["parts"], ran)
    if where["env"] is None:  # no part's file names its machine: this one's (torch imported for it)
        from kbench.hardware import environment

        where["env"] = environment()
    result["env"] = where["env"]
    result["machines"] = where["machines"]
    result["goals"] = goals(result["parts"])
    result["date"] = where["date"] or common.utc_now()
    text = report(result)
    (args.out / "vs_upstream.json").write_text(json.dumps(result, indent=1, default=str))
    (args.out / "vs_upstream.md").write_text(text)
    print(text)
    files = [args.out / name / FILES[name] for name in PARTS if result["parts"][name] is not None]
    common.record_markdown(
        args.record, "vs-upstream", text, metrics=metrics(result["goals"]), artifacts=files,
        env=common.record_env(result["env"], where["commit"] or common.commit()), date=result["date"],
        command=result["command"],
    )  # fmt: skip


if __name__ == "__main__":
    main()
