"""What every benchmark script shares: the repository root, the machine's header and the results writer.

A measurement is filed as one JSON object appended to `benchmarks/results/<hardware>/<benchmark>.jsonl`
(the schema is `tables.RECORD_KEYS`), and the Markdown table beside it is regenerated from the whole file
(`python benchmarks/tables.py` does the same for every file). Scripts take `--record [RESULTS]`: without it
they write only their own outputs; with it they also file their record under RESULTS (default
`benchmarks/results`; on a remote machine, a folder that comes back, merged here with `tables.py merge`).

Nothing here imports kbench: the header reads installed versions, so it works whatever kbench's layout.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.metadata
import os
import platform
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
RESULTS = BENCHMARKS / "results"


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def _project_version() -> str | None:
    """The checkout's own version (pyproject.toml), where kbench runs from a source tree on PYTHONPATH
    and no installed distribution says it."""
    import tomllib

    try:
        return str(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"])
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return None


COMMIT_ENV = "BENCH_COMMIT"  # names the commit of a copied tree whose .git is missing or not its own


def commit(root: Path = ROOT) -> str | None:
    """The short commit of the checkout the scripts run from ($BENCH_COMMIT where set; None outside a git
    work tree), with `+changes` when tracked files differ from it: a record then never names a commit whose
    files were not the ones measured (uncommitted edits, or a copied tree whose .git is an older one's)."""
    if os.environ.get(COMMIT_ENV):
        return os.environ[COMMIT_ENV]

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    head = git("rev-parse", "--short", "HEAD")
    if not head:
        return None
    changed = git("status", "--porcelain", "--untracked-files=no")
    return head if changed == "" else f"{head}+changes"


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _gpus() -> tuple[list[str], str | None, str | None]:
    """GPU names, the CUDA version torch was built with, and the driver (nvidia-smi), without CUDA init."""
    cuda = None
    try:
        import torch

        cuda = torch.version.cuda
    except ImportError:
        pass
    if shutil.which("nvidia-smi") is None:
        return [], cuda, None
    query = ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"]
    try:
        done = subprocess.run(query, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return [], cuda, None
    rows = [line.split(", ") for line in done.stdout.splitlines() if line.strip()]
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible and visible.replace(",", "").isdigit():
        rows = [rows[int(i)] for i in visible.split(",") if int(i) < len(rows)]
    return [r[0] for r in rows], cuda, (rows[0][1] if rows and len(rows[0]) > 1 else None)


def environment() -> dict[str, Any]:
    """The header of a record: versions, machine and hardware folder of the machine this runs on."""
    gpus, cuda, driver = _gpus()
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    machine = machine_line(_cpu_name(), cpus, len(gpus), gpus[0] if gpus else None)
    return {
        "hardware": hardware_name(gpus[0] if gpus else None),
        "kbench": {"version": _version("kbench") or _project_version(), "commit": commit()},
        "versions": {
            "python": platform.python_version(),
            "torch": _version("torch"),
            "triton": _version("triton"),
            "cuda": cuda if gpus else None,
            "driver": driver,
        },
        "machine": machine,
    }


def machine_line(cpu: Any, cpus: Any, gpu_count: Any, gpu: str | None) -> str:
    """A record's `machine`: `CPU x N`, then `, Kx GPU` where it has GPUs."""
    return f"{cpu} x {cpus}" + (f", {gpu_count}x {gpu}" if gpu else "")


def write_report(path: Path, lines: list[str]) -> None:
    """A measurement's Markdown report: written to `path` (its folder made) and printed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines))
    print("\n".join(lines))


def utc_now() -> str:
    """Now, as a record dates a run."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def record_env(measured: dict[str, Any], commit: str | None) -> dict[str, Any]:
    """A record's header from the facts another machine gave (`kbench env --format json`, which the
    scripts keep in their JSON as `env`): for a report or record made where it was not measured."""
    machine = machine_line(
        measured.get("cpu"), measured.get("cpu_count"), measured.get("gpu_count"), measured.get("gpu")
    )
    return {
        "hardware": hardware_name(measured.get("gpu")),
        "kbench": {"version": measured.get("kbench"), "commit": commit},
        "versions": {k: measured.get(k) for k in ("python", "torch", "triton", "cuda", "driver")},
        "machine": machine if measured else "",
    }


def hardware_name(gpu: str | None) -> str:
    """The results folder of a machine: `cpu` without a GPU, else the GPU's model (`NVIDIA H200` -> h200)."""
    if not gpu:
        return "cpu"
    name = re.sub(r"^(NVIDIA|AMD)\s+", "", gpu.strip(), flags=re.I)
    name = re.sub(r"\s+\d+\s*GB(\s+HBM\w*)?$", "", name, flags=re.I)  # H100 80GB HBM3 -> H100
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "gpu"


def command_line(argv: list[str] | None = None) -> str:
    """How this script was started, as a user would type it from the repository root: without `--record`
    (where the record is filed, not a setting) and with the machine's own absolute paths (`--out /tmp/x`,
    `--cache=/root/c`) shown as the option's name (`--out OUT`), since they name nothing on another machine."""
    argv = sys.argv if argv is None else argv
    script = Path(argv[0]).resolve()
    try:
        shown = [str(script.relative_to(ROOT))]
    except ValueError:
        shown = [script.name]

    def placeholder(option: str) -> str:  # --work-dir -> WORK_DIR
        return option.lstrip("-").upper().replace("-", "_")

    args = argv[1:]
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        option, eq, value = arg.partition("=")
        if option == "--record":
            if not eq and i < len(args) and not args[i].startswith("-"):
                i += 1  # its RESULTS folder
            continue
        if eq and option.startswith("--") and value.startswith("/"):
            arg = f"{option}={placeholder(option)}"
        elif arg.startswith("/") and shown[-1].startswith("--"):
            arg = placeholder(shown[-1])
        shown.append(arg)
    return " ".join(["python", *shown])


def add_record_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--record",
        type=Path,
        nargs="?",
        const=RESULTS,
        default=None,
        metavar="RESULTS",
        help="also append this run's record to RESULTS/<hardware>/<benchmark>.jsonl and regenerate its "
        "Markdown table (default RESULTS: benchmarks/results)",
    )


def new_record(
    benchmark: str,
    *,
    title: str | None = None,
    body: list[dict[str, Any]] | None = None,
    metrics: dict[str, Any] | None = None,
    command: str | None = None,
    env: dict[str, Any] | None = None,
    date: str | None = None,
) -> dict[str, Any]:
    env = env or environment()
    return {
        "benchmark": benchmark,
        "hardware": env["hardware"],
        "date": date or utc_now(),
        "title": title,
        "kbench": env["kbench"],
        "versions": env["versions"],
        "machine": env["machine"],
        "command": command or command_line(),
        "body": body or [],
        "metrics": metrics or {},
        "artifacts": [],
    }


def append_record(
    record: dict[str, Any], results: Path = RESULTS, artifacts: list[Path] | None = None
) -> Path:
    """Append `record` to RESULTS/<hardware>/<benchmark>.jsonl, copying `artifacts` beside it; render .md."""
    import tables  # the renderer; imported here so that tables.py may import this module

    folder = results / record["hardware"]
    if artifacts:
        stamp = record["date"][:19].replace(":", "").replace("T", "-")
        dest = folder / record["benchmark"] / stamp
        dest.mkdir(parents=True, exist_ok=True)
        for path in artifacts:
            shutil.copy2(path, dest / path.name)
            record["artifacts"].append((dest / path.name).relative_to(folder).as_posix())
    return tables.append(folder / f"{record['benchmark']}.jsonl", record)


def record_markdown(
    results: Path | None,
    benchmark: str,
    markdown: str,
    *,
    metrics: dict[str, Any] | None = None,
    artifacts: list[Path] | None = None,
    env: dict[str, Any] | None = None,
    date: str | None = None,
    command: str | None = None,
) -> Path | None:
    """File a script's Markdown output as a record (its title, paragraphs and tables), when asked to;
    `env`, `date` and `command` where it was measured on another machine or by other calls (`env` a
    record header, see record_env)."""
    if results is None:
        return None
    import tables

    title, body = tables.parse_markdown(markdown)
    record = new_record(
        benchmark, title=title, body=body, metrics=metrics, env=env, date=date, command=command
    )
    path = append_record(record, results, artifacts)
    print(f"recorded in {path}", file=sys.stderr)
    return path


def start_service(args: list[str], env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    """`kbench serve --port 0 ARGS` started here with these environment variables added (and this
    interpreter's import path): the process and its URL, once it listens."""
    cmd = [sys.executable, "-m", "kbench", "serve", "--port", "0", *args]
    env = dict(os.environ, **env, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("kbench serve: http"):
        raise SystemExit(f"kbench serve did not start: {line}{proc.communicate(timeout=60)[1][-3000:]}")
    return proc, line.split()[2]
