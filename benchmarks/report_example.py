"""A real run for the README's example report: 21 verdicts on the CPU, then the HTML report and a screenshot.

    python benchmarks/report_example.py --out docs/report-example.png

The "model" replays a folder (`replay/PATH`) written here for the 7 level-2 problems that ship a C++
solution, 3 samples each: sample 0 is the shipped solution; sample 1 is the same extension with a wrong
scale in Python (a `mismatch` that reuses sample 0's build); sample 2 answers in prose without code
(`no_code`). Everything else is kbench's ordinary path: `kbench run` (evaluator, store), `kbench report`
(HTML), and headless Chromium for the PNG when it is on PATH.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from kbench.problems.sources import load_source
from kbench.solutions import shipped_candidate as reference_candidate

PROSE = "The fused version should be faster: load the tensor once and apply all three operations.\n"


def wrong(source: str) -> str:
    """The solution with its output scaled by 1.01 in Python: same build, wrong numbers."""
    found = re.search(r"^(\s+)return (.+)$", source.split("class ModelNew", 1)[1], re.M)
    if found is None:
        raise ValueError("no return statement in ModelNew")
    head, tail = source.split("class ModelNew", 1)
    tail = tail.replace(found.group(0), f"{found.group(1)}return ({found.group(2)}) * 1.01", 1)
    return head + "class ModelNew" + tail


def replay_folder(folder: Path) -> list[str]:
    keys = []
    for p in load_source("kbench"):
        c = reference_candidate(p, "cpp") if p.level == 2 else None
        if c is None:
            continue
        stem = f"level_2_problem_{p.number}"
        (folder / f"{stem}_sample_0_kernel.py").write_text(c.source)
        (folder / f"{stem}_sample_1_kernel.py").write_text(wrong(c.source))
        (folder / f"{stem}_sample_2_turn_0.md").write_text(PROSE)
        keys.append(f"2/{p.number}")
    return keys


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("docs/report-example.png"))
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kbench-report-example-"))
    replay = work / "example-model"  # the series is named after it: replay/example-model
    replay.mkdir()
    keys = replay_folder(replay)
    store, html = work / "kbench.db", work / "report.html"
    kbench = [sys.executable, "-m", "kbench"]
    subprocess.run(
        [*kbench, "run", "--model", f"replay/{replay.name}", "--backend", "cpp", "--device", "cpu", "--level", "2",
         "--problems", ",".join(keys), "--samples", "3", "--store", str(store),
         "--html", str(html)],
        check=True,
        cwd=work,
    )  # fmt: skip
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        print(f"no chromium on PATH: the report is {html}")
        return
    args.out.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         f"--user-data-dir={work / 'profile'}", f"--screenshot={args.out.resolve()}", "--window-size=1400,2600",
         html.as_uri()],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    print(f"wrote {args.out} from {html}")


if __name__ == "__main__":
    main()
