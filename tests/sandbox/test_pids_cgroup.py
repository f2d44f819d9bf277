"""The cap on a job's processes that binds root: a pids cgroup of the runner's own (isolate.cgroup_pids),
where a pids controller is writable (root, which RLIMIT_NPROC does not bind)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kbench.sandbox import isolate

FORK_BOMB = """
import os, sys
from kbench.sandbox import isolate
folder = isolate.cgroup_pids(8)
assert folder, "no cgroup"
made, refused = [], 0
for _ in range(30):
    try:
        pid = os.fork()
    except BlockingIOError:
        refused += 1
        continue
    if pid == 0:
        import time
        time.sleep(5)
        os._exit(0)
    made.append(pid)
for pid in made:
    os.kill(pid, 9)
    os.waitpid(pid, 0)
print(len(made), refused, folder)
"""


@pytest.mark.skipif(
    os.getuid() != 0 or isolate._pids_root() is None, reason="needs root and a pids controller"
)
def test_a_runner_started_by_root_forks_no_more_than_its_cap_and_its_cgroup_goes_with_it() -> None:
    run = subprocess.run([sys.executable, "-c", FORK_BOMB], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr[-2000:]
    made, refused, folder = run.stdout.split()
    assert int(made) <= 7 and int(refused) >= 23  # itself and 7 children: 8 processes at most
    isolate.drop_cgroup(int(folder.rsplit("-", 1)[1]))
    assert not os.path.exists(folder)


LEAVE = """
import json, os, sys
from pathlib import Path
from kbench.sandbox import confine, isolate
folder = isolate.cgroup_pids(8)
isolate.enter(isolate.Walls(mount=False))
confined = confine.confine([Path(sys.argv[1])])
tried = {}
for target, text in ((Path(folder).parent / "cgroup.procs", str(os.getpid())), (Path(folder) / "pids.max", "max")):
    try:
        target.write_text(text)
        tried[target.name] = "written"
    except OSError as exc:
        tried[target.name] = exc.strerror
made = []
for _ in range(20):
    try:
        pid = os.fork()
    except BlockingIOError:
        continue
    if pid == 0:
        import time
        time.sleep(3)
        os._exit(0)
    made.append(pid)
for pid in made:
    os.kill(pid, 9)
    os.waitpid(pid, 0)
print(json.dumps({"folder": folder, "confined": confined, "tried": tried, "made": len(made)}))
"""


@pytest.mark.skipif(
    os.getuid() != 0 or isolate._pids_root() is None, reason="needs root and a pids controller"
)
def test_a_candidate_can_neither_leave_its_cgroup_nor_raise_its_cap(tmp_path: Path) -> None:
    """Behind its walls (a user namespace, Landlock), a runner's process cannot move itself to the
    parent cgroup nor write its own pids.max: its forks stay under the cap."""
    from kbench.sandbox import confine

    if confine.abi()[0] < confine.MIN_ABI:
        pytest.skip("needs Landlock: the cgroup's files are root's, whom a user namespace maps to")
    run = subprocess.run(
        [sys.executable, "-c", LEAVE, str(tmp_path)], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stderr[-2000:]
    got = json.loads(run.stdout)
    try:
        assert got["confined"].startswith("landlock"), got
        assert got["tried"] == {"cgroup.procs": "Permission denied", "pids.max": "Permission denied"}, got
        assert got["made"] <= 7, got
    finally:
        isolate.drop_cgroup(int(got["folder"].rsplit("-", 1)[1]))


def test_without_a_writable_pids_controller_nothing_is_made(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(isolate, "_pids_root", lambda: None)
    assert isolate.cgroup_pids(8) == ""
    isolate.drop_cgroup(os.getpid())  # nothing to remove: no error


@pytest.mark.xdist_group("doctor-kill")  # `doctor --kill` ends every stale process here: one at a time
@pytest.mark.skipif(
    os.getuid() != 0 or isolate._pids_root() is None, reason="needs root and a pids controller"
)
def test_a_cgroup_left_by_a_killed_referee_is_found_and_removed_by_doctor(tmp_path: Path) -> None:
    """A referee killed before it removed its runner's cgroup leaves an empty one behind: `kbench doctor`
    lists it and `--kill` removes it; a live runner's cgroup is never touched."""
    from typer.testing import CliRunner

    from kbench.cli import app

    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    base = isolate._pids_root()
    assert base is not None
    left = base / f"{isolate.CGROUP_PREFIX}{int(gone.stdout)}"
    live = base / f"{isolate.CGROUP_PREFIX}{os.getpid()}"
    left.mkdir()
    live.mkdir(exist_ok=True)
    try:
        assert left in isolate.stale_cgroups() and live not in isolate.stale_cgroups()
        runner = CliRunner()
        seen = runner.invoke(app, ["doctor", "--format", "json", "--cache-dir", str(tmp_path)])
        assert str(left) in json.loads(seen.output)["stale_cgroups"]
        runner.invoke(app, ["doctor", "--kill", "--cache-dir", str(tmp_path)])
        assert not left.exists() and live.exists()
        left.mkdir()
        isolate.drop_cgroup(int(gone.stdout) + 10**7)  # the next job's referee, removing its own, sweeps
        assert not left.exists() and live.exists()
    finally:
        for folder in (left, live):
            if folder.exists():
                folder.rmdir()


def test_the_cap_counts_threads_with_room_for_the_thread_pools() -> None:
    """The kernel counts threads against both caps (pids.max, RLIMIT_NPROC): the walls' number, plus two
    a core for the pools torch, OpenMP, CUDA and Triton start."""
    walls = isolate.Walls(procs=100)
    assert isolate.tasks(walls) == 100 + 2 * (os.cpu_count() or 1)
