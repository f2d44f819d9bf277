"""Generation at scale against the local test server: 1,000 prompts, 16-way, 20 % of requests answered 429.

Checks, and writes to --out (default benchmark-out/llm-throughput.md):
- every prompt completes, exactly one journal entry each;
- the server never sees more than 16 requests in flight;
- a run killed (SIGKILL) part-way, then started again on the same folder, asks only the prompts its
  first run had not journaled (at most the ones in flight at the kill are asked twice).

    .venv/bin/python benchmarks/llm_throughput.py [--prompts 1000] [--concurrency 16] [--kill-after 400]
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from common import ROOT

VARIANT_RE = re.compile(r"# variant (\d+)")


def load_server():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(
        "kbench_tests_llm_server", ROOT / "tests" / "llm" / "server.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.LLMServer


def problems(n: int) -> list:  # type: ignore[type-arg]
    from kbench.problems import get_problem

    base = get_problem("2/1")
    return [replace(base, level=9, number=i, code=base.code + f"\n# variant {i}\n") for i in range(n)]


def child(url: str, out: str, n: int, concurrency: int) -> None:
    from kbench.config import RunConfig
    from kbench.generate import generate, make_client

    cfg = RunConfig(
        model="openai/bench", base_url=url, backend="cpp", concurrency=concurrency, max_tokens=512
    )
    # No response cache: the journal alone must keep finished prompts from being asked again.
    result = generate(problems(n), cfg, Path(out), client=make_client(cfg, cache=False))
    print(
        json.dumps(
            {"attempts": len(result.attempts), "failed": len(result.failed), "resumed": result.resumed}
        )
    )


def journal_lines(out: Path) -> list[dict]:  # type: ignore[type-arg]
    path = out / "journal.jsonl"
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            pass
    return rows


def run_child(url: str, out: Path, args: argparse.Namespace, kill_after: int | None) -> tuple[float, str]:
    cmd = [sys.executable, __file__, "--child", url, str(out), "--prompts", str(args.prompts)]
    cmd += ["--concurrency", str(args.concurrency)]
    env = os.environ | {"OPENAI_API_KEY": "bench"}
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True)
    if kill_after is not None:
        while proc.poll() is None and len(journal_lines(out)) < kill_after:
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
    stdout, _ = proc.communicate()
    return time.perf_counter() - start, stdout.strip()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", nargs=2)
    ap.add_argument("--prompts", type=int, default=1000)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--kill-after", type=int, default=400)
    ap.add_argument("--p429", type=float, default=0.2)
    # A 20 ms answer keeps 16 requests in flight at once; an instant one never overlaps on a small machine.
    ap.add_argument("--delay-ms", type=float, default=20.0)
    ap.add_argument("--out", type=Path, default=Path("benchmark-out/llm-throughput.md"))
    args = ap.parse_args()
    if args.child:
        child(args.child[0], args.child[1], args.prompts, args.concurrency)
        return
    server_cls = load_server()
    answer = "```python\nimport torch\n\nclass ModelNew(torch.nn.Module):\n    pass\n```\n"
    with (
        tempfile.TemporaryDirectory() as tmp,
        server_cls(respond=lambda r: answer, p429=args.p429, delay_s=args.delay_ms / 1000) as server,
    ):
        out = Path(tmp) / "gen"
        t1, _ = run_child(server.openai_url, out, args, args.kill_after)
        first = {r["number"] for r in journal_lines(out) if r["final"]}
        split = len(server.stats.seen)
        t2, summary = run_child(server.openai_url, out, args, None)
        report = check(server.stats, out, first, split, args, t1, t2, summary)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(report)
    print(report)


def check(stats, out, first, split, args, t1, t2, summary) -> str:  # type: ignore[no-untyped-def]
    rows = [r for r in journal_lines(out) if r["final"]]
    numbers = [r["number"] for r in rows]
    second_asked = {int(m.group(1)) for r in stats.seen[split:] if (m := VARIANT_RE.search(r.last_user))}
    reasked = first & second_asked
    answered_twice = sum(1 for n in stats.answered.values() if n > 1)
    ok = {
        "every prompt journaled exactly once": sorted(numbers) == list(range(args.prompts)),
        f"max in flight <= {args.concurrency}": stats.max_in_flight <= args.concurrency,
        "second run asked no prompt the first run journaled": not reasked,
        f"prompts answered twice <= {args.concurrency} (in flight at the kill)": answered_twice
        <= args.concurrency,
    }
    import openai
    import torch

    from kbench.hardware import environment

    lines = [
        "# LLM generation throughput and resumability",
        "",
        f"Recorded {datetime.date.today().isoformat()} with `python benchmarks/llm_throughput.py` "
        f"on {environment()['cpu']}, {os.cpu_count()} CPU cores, "
        f"Python {platform.python_version()}, openai {openai.__version__}, torch {torch.__version__}.",
        "",
        f"Setup: {args.prompts} prompts, {args.concurrency}-way concurrency, local server (tests/llm/server.py) "
        f"answering {args.p429:.0%} of requests with 429 (retry-after-ms: 5), every answer after "
        f"{args.delay_ms:g} ms; client retries by the openai SDK. "
        f"First run killed with SIGKILL after {args.kill_after} journal entries, then run again on the same folder.",
        "",
        "| measure | value |",
        "| --- | --- |",
        f"| requests seen by the server | {stats.requests} |",
        f"| answered 429 | {stats.statuses.get(429, 0)} ({stats.statuses.get(429, 0) / max(1, stats.requests):.1%}) |",
        f"| answered 200 | {stats.statuses.get(200, 0)} |",
        f"| most requests in flight | {stats.max_in_flight} |",
        f"| journaled by the killed run | {len(first)} |",
        f"| prompts answered twice (in flight at the kill) | {answered_twice} |",
        f"| first run (killed) wall time | {t1:.1f} s |",
        f"| second run wall time | {t2:.1f} s |",
        f"| second run summary | `{summary}` |",
        "",
        "| check | result |",
        "| --- | --- |",
        *[f"| {name} | {'PASS' if good else 'FAIL'} |" for name, good in ok.items()],
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
