"""The runner as its referee sees it (referee/runner.py): forked behind its walls, heard through a bounded
log, and ended with everything it started, whatever it did to escape."""

from __future__ import annotations

import json
import os
import textwrap
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from kbench.referee import runner as runnerlib
from kbench.sandbox import isolate
from kbench.sandbox.commands import Ready, Setup


def _probe(folder: Path, body: str) -> None:
    """A runner module (`probe`, found through the runner's working folder) that runs `body`, then waits
    until its referee hangs up."""
    (folder / "probe.py").write_text(
        textwrap.dedent(
            """
            import os, socket, sys, time
            sock = socket.socket(fileno=int(os.environ["KBENCH_RUNNER_FD"]))
            """
        )
        + textwrap.dedent(body)
        + "\nsock.recv(1)\n"
    )


def _start(folder: Path, walls: isolate.Walls | None, log: Path | None = None) -> runnerlib.RunnerProcess:
    proc = runnerlib.RunnerProcess("probe", log)
    setup = Setup(
        walls=asdict(walls) if walls else None, cwd=str(folder), env={"PYTHONDONTWRITEBYTECODE": "1"}
    )
    proc.channel.send(setup)
    ready, _ = proc.channel.receive(Ready, timeout=30)
    assert isinstance(ready, Ready)
    return proc


ESCAPE = """
pid = os.fork()
if pid == 0:
    os.setsid()  # its own session
    if os.fork() == 0:  # and orphaned: reparented away from the runner
        open(sys.argv[0] + ".escaped", "w").write(str(os.getpid()))
        time.sleep(600)
    os._exit(0)
os.waitpid(pid, 0)
time.sleep(0.3)
"""


def _referee_in_a_child(tmp_path: Path, walls: isolate.Walls) -> dict[str, Any]:
    """Play the referee in a forked process (it becomes a subreaper, which the test process must not)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        out: dict[str, Any] = {}
        try:
            proc = runnerlib.RunnerProcess("probe")
            reaper = isolate.subreaper()
            proc.channel.send(
                Setup(walls=asdict(walls), cwd=str(tmp_path), env={"PYTHONDONTWRITEBYTECODE": "1"})
            )
            ready, _ = proc.channel.receive(Ready, timeout=30)
            time.sleep(1.0)
            left = proc.leftovers()
            out = {"reaper": reaper, "confinement": ready.confinement, "left": left}
            proc.end()
            out["alive_after"] = [p for p in left if _alive(p)]
        except Exception as exc:
            out["error"] = repr(exc)
        os.write(w, json.dumps(out).encode())
        os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 1 << 16):
        data += chunk
    os.waitpid(pid, 0)
    return json.loads(data)


def _alive(pid: int) -> bool:
    from kbench.sandbox import procs

    info = procs.info_of(pid)
    return info is not None and info.alive


@pytest.mark.parametrize("pid_namespace", [True, False], ids=["pid-namespace", "subreaper"])
def test_what_a_runner_leaves_behind_is_found_and_ended(tmp_path: Path, pid_namespace: bool) -> None:
    _probe(tmp_path, ESCAPE)
    walls = isolate.Walls(pid=pid_namespace, net=pid_namespace, mount=pid_namespace)
    got = _referee_in_a_child(tmp_path, walls)
    assert "error" not in got, got
    if pid_namespace and "pid" not in got["confinement"]:
        pytest.skip(f"no PID namespace here: {got['confinement']}")
    assert len(got["left"]) == 1, got  # the double-forked, setsid process
    assert got["alive_after"] == []


def test_an_honest_runner_leaves_nothing(tmp_path: Path) -> None:
    _probe(tmp_path, "time.sleep(0.1)\n")
    got = _referee_in_a_child(tmp_path, isolate.Walls())
    assert got["left"] == [] and got["alive_after"] == []


def test_a_runner_that_prints_without_end_fills_neither_disk_nor_memory(tmp_path: Path) -> None:
    total = 3 * runnerlib.LOG_HEAD
    _probe(
        tmp_path,
        f"""
        line = b"x" * 1023 + b"\\n"
        for _ in range({total} // 1024):
            os.write(1, line)
        os.write(1, b"THE LAST LINE\\n")
        """,
    )
    log = tmp_path / "log.txt"
    proc = _start(tmp_path, None, log)
    deadline = time.monotonic() + 60
    while b"THE LAST LINE" not in log.read_bytes()[-4096:] and time.monotonic() < deadline:
        time.sleep(0.1)
    proc.end()
    data = log.read_bytes()
    assert len(data) <= runnerlib.LOG_HEAD + runnerlib.LOG_TAIL + 200
    assert data.endswith(b"THE LAST LINE\n") and b"bytes of output not kept" in data
    assert len(proc.relay.tail) <= runnerlib.LOG_TAIL if proc.relay else True


def test_the_host_reads_only_a_logs_tail(tmp_path: Path) -> None:
    from kbench.sandbox.host import LOG_TAIL_BYTES, log_tail

    log = tmp_path / "log.txt"
    with log.open("wb") as f:
        f.write(b"early\n" * 100_000)
        f.write(b"x" * (4 * LOG_TAIL_BYTES))
        f.write(b"\nthe end\n")
    assert log_tail(log).endswith("the end") and "early" not in log_tail(log)


def test_a_runners_tool_folders_are_never_importable(tmp_path: Path) -> None:
    """The runner's working folder is the first entry of its import path: a tool folder there named like
    a module (`triton`) would be imported as a namespace package where that module is not installed, and
    torch.compile would take it for Triton and fail. Every folder the runner's tools use there is named so
    Python cannot import it."""
    from kbench.referee.job import runner_env

    env = runner_env(tmp_path, "cpu")
    inside = [Path(v) for v in env.values() if v.startswith(str(tmp_path) + "/")]
    names = {p.relative_to(tmp_path).parts[0] for p in inside}
    assert {"triton-cache", "xdg-cache", "inductor-cache"} <= names
    assert [n for n in names if n.isidentifier()] == []
    # Inductor's cache (torch.compile, Helion's generated kernels) is a candidate runner's own, never a
    # folder under a temporary directory another job shares; a trusted runner (a reference's) keeps its own
    assert env["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "inductor-cache")
    assert "TORCHINDUCTOR_CACHE_DIR" not in runner_env(tmp_path, "cpu", untrusted=False)
