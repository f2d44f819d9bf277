"""Kill during a hang: `kbench eval` and `kbench run`, hung in a candidate's forward, sent each stop signal.

    python benchmarks/kill_hang.py --out OUT/kill-hang.md [--record]   # on a GPU machine

On a GPU the candidate is a Triton Gemm_ReLU that runs its kernel, holds 2 GiB of GPU memory and spins
in forward (benchmarks/candidates/triton_hang.py); on a CPU-only machine a Python one that starts a
child and spins (the cpp backend). For each command and each of SIGINT, SIGTERM, SIGHUP and SIGKILL,
sent 2 s after the candidate hangs, it records 2 s after the signal: kbench's exit status, the
evaluation's processes still alive, the GPU memory in use against before the hang and the processes
the GPU still lists, the GPU lease's state; then the next honest evaluation on the same GPU (its status
and seconds), which would wait for a lease left behind.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from common import BENCHMARKS, ROOT, add_record_argument, record_markdown, utc_now

from kbench.hardware import environment
from kbench.sandbox import lease, procs

KBENCH = [sys.executable, "-c", "from kbench.cli import main; main()"]
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGKILL)


@dataclass
class Case:
    command: str
    sig: str
    exit_code: int | None
    left: list[str]
    gpu_mib_before: int | None
    gpu_mib_hung: int | None
    gpu_mib_after: int | None
    gpu_pids_after: list[int]
    lease_state: str
    next_status: str
    next_s: float


def _gpu() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def _smi(query: str) -> list[str]:
    try:
        out = subprocess.run(["nvidia-smi", f"--query-{query}", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=30).stdout  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [line.strip() for line in out.splitlines() if line.strip()]


def _gpu_mib() -> int | None:
    rows = _smi("gpu=memory.used")
    return int(rows[0]) if rows and rows[0].isdigit() else None


def _gpu_pids() -> list[int]:
    return [int(r.split(",")[0]) for r in _smi("compute-apps=pid") if r.split(",")[0].strip().isdigit()]


def _setup(tmp: Path, gpu: bool) -> tuple[list[str], list[str], list[str]]:
    """(common flags, hanging eval args, hanging run args) and the honest candidate's eval args."""
    if gpu:
        common = ["--backend", "triton", "--preset", "small", "--no-static"]
        hang, honest = BENCHMARKS / "candidates/triton_hang.py", BENCHMARKS / "candidates/triton_gemm_relu.py"
    else:
        common = ["--backend", "cpp", "--preset", "small", "--device", "cpu", "--no-static"]
        hang, honest = (
            ROOT / "tests/fixtures/eval/py_hang_signal.py",
            ROOT / "tests/fixtures/eval/cpp_honest.py",
        )
    replay = tmp / "replay"
    replay.mkdir()
    (replay / "level_2_problem_1_sample_0_kernel.py").write_text(hang.read_text())
    text = honest.read_text()
    first = text.splitlines()[0]
    if first.startswith("# include:"):  # the test fixtures share one C++ extension source
        text = (honest.parent / first.split(":", 1)[1].strip()).read_text() + "\n" + text
    (tmp / "honest.py").write_text(text)
    eval_args = ["eval", "-p", "2/1", "-c", str(hang), "--no-timing", *common]
    run_args = ["run", "-m", f"replay/{replay}", "--problems", "2/1", *common]
    honest_args = [
        "eval",
        "-p",
        "2/1",
        "-c",
        str(tmp / "honest.py"),
        "--no-timing",
        "--format",
        "json",
        *common,
    ]
    return eval_args, run_args, honest_args


def one(command: str, args: list[str], honest: list[str], sig: signal.Signals, env: dict[str, str],
        tmp: Path) -> Case:  # fmt: skip
    before = _gpu_mib()
    proc = subprocess.Popen([*KBENCH, *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)  # fmt: skip
    owner = procs.ProcRef.of(proc.pid)
    deadline = time.monotonic() + 300

    def hanging() -> bool:  # the candidate starts 'sleep 307' once it hangs
        return owner is not None and bool(procs.running(owner, proc.pid, "sleep 307"))

    while not hanging() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    if not hanging():
        proc.kill()
        raise SystemExit(f"{command}: the candidate never hung:\n{proc.communicate()[1].decode()[-3000:]}")
    time.sleep(2.0)
    hung = _gpu_mib()
    os.kill(proc.pid, sig)
    time.sleep(2.0)
    code = proc.poll()
    left = (
        [f"{pid} {procs.command(pid)[:120]}" for pid in procs.belonging_to(owner, proc.pid)] if owner else []
    )
    after, pids = _gpu_mib(), _gpu_pids()
    states = [
        f"{name}: {'stale' if stale else 'held' if held else 'free'}"
        for name, _, held, stale in lease.leases()
    ]
    proc.kill()
    proc.wait()
    t0 = time.monotonic()
    nxt = subprocess.run([*KBENCH, *honest], env=env, capture_output=True, text=True, timeout=900)
    status = "ok" if '"status": "ok"' in nxt.stdout else f"failed ({nxt.returncode}): {nxt.stderr[-200:]!r}"
    return Case(command, sig.name, code, left, before, hung, after, pids, "; ".join(states) or "-", status,
                time.monotonic() - t0)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    add_record_argument(parser)
    args = parser.parse_args()
    gpu = _gpu()
    cases = []
    with tempfile.TemporaryDirectory(prefix="kbench-kill-") as tmp:
        env = {**os.environ, "KBENCH_STORE": str(Path(tmp) / "kbench.db")}
        eval_args, run_args, honest = _setup(Path(tmp), gpu)
        warm = subprocess.run([*KBENCH, *honest], env=env, capture_output=True, text=True, timeout=900)
        if '"status": "ok"' not in warm.stdout:  # builds and caches; an honest verdict before any kill
            raise SystemExit(
                f"the honest candidate failed before any kill:\n{warm.stdout[-2000:]}{warm.stderr[-2000:]}"
            )
        for command, cmd_args in (("eval", eval_args), ("run", run_args)):
            for sig in SIGNALS:
                cases.append(one(command, cmd_args, honest, sig, env, Path(tmp)))
                c = cases[-1]
                print(f"{command} {c.sig}: exit {c.exit_code}, left {c.left}, gpu {c.gpu_mib_before}->"
                      f"{c.gpu_mib_hung}->{c.gpu_mib_after} MiB, next {c.next_status} {c.next_s:.1f} s", flush=True)  # fmt: skip
    write(args.out, cases, gpu)
    record_markdown(args.record, "kill-hang", args.out.read_text())


def write(out: Path, cases: list[Case], gpu: bool) -> None:
    env = environment()
    lines = [
        f"# Kill during a hang ({utc_now()})",
        "",
        f"kbench {env.get('kbench')}, torch {env.get('torch')}, triton {env.get('triton')}, python "
        f"{env.get('python')}, {env.get('cpu')} x {env.get('cpu_count')}, gpu {env.get('gpu')}",
        "",
        "`python benchmarks/kill_hang.py`: "
        + (
            "a Triton candidate holding 2 GiB of GPU memory, spinning in forward"
            if gpu
            else "a Python candidate that starts a child and spins in forward (cpp backend, CPU)"
        )  # fmt: skip
        + "; the signal 2 s after it hangs; everything else 2 s after the signal.",
        "",
        "| command | signal | exit | processes left | GPU MiB before / hung / after | GPU pids after | lease |"
        " next honest eval |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for c in cases:
        mem = f"{c.gpu_mib_before} / {c.gpu_mib_hung} / {c.gpu_mib_after}" if gpu else "-"
        lines.append(
            f"| `kbench {c.command}` | {c.sig} | {c.exit_code} | {len(c.left)} | {mem} | "
            f"{' '.join(map(str, c.gpu_pids_after)) or '-'} | {c.lease_state} | {c.next_status}, {c.next_s:.1f} s |"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    print(out.read_text())


if __name__ == "__main__":
    main()
