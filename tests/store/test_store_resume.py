"""A run killed with SIGKILL mid-way resumes without losing or duplicating a finished verdict."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from kbench.store import Store

TOTAL = 60
# The child writes fake verdicts through Store, skipping done keys exactly as `kbench run --resume` does,
# and prints one line per committed verdict; a short sleep leaves time to kill it between and during writes.
CHILD = textwrap.dedent(
    """
    import sys, time
    from kbench.store import Store, VerdictKey
    from kbench.types import Status, TimingStats, Verdict

    path, run_id, total = sys.argv[1], sys.argv[2], int(sys.argv[3])
    store = Store(path)
    store.start_run({"model": "fake"}, {"gpu": None, "cpu": "test", "device": "cpu"}, run_id)
    done = store.done_keys(run_id)
    for i in range(total):
        key = VerdictKey(f"kbench:2/{i // 3}", i % 3, 0, "cpp", "fake/model")
        if key in done:
            continue
        t = TimingStats(1.0 + i, 1.0 + i, 0.0, 0.0, 1.0, 10, 0.01)
        v = Verdict(Status.OK, key.problem_key, "cpp", "small", "fp32", "cpu", timing=t)
        store.record(run_id, key, v, f"# candidate {i}")
        print(i, flush=True)
        time.sleep(0.01)
    """
)


def _child(db: Path, run_id: str) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(db), run_id, str(TOTAL)], stdout=subprocess.PIPE, text=True, env=env
    )


def test_sigkill_mid_run_then_resume(tmp_path: Path) -> None:
    db = tmp_path / "kbench.db"
    proc = _child(db, "killed-run")
    assert proc.stdout is not None
    for _ in range(20):  # wait for 20 committed verdicts, then kill without warning
        assert proc.stdout.readline(), "child exited early"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL

    store = Store(db)
    after_kill = len(store.done_keys("killed-run"))
    assert 20 <= after_kill < TOTAL  # nothing printed as done was lost; the run was really cut short

    resumed = _child(db, "killed-run")
    out, _ = resumed.communicate(timeout=120)
    assert resumed.returncode == 0
    assert len(out.split()) == TOTAL - after_kill  # the resumed child only wrote what was missing

    records = store.records("killed-run")
    keys = [r.key for r in records]
    assert len(keys) == TOTAL == len(set(keys))
    (count, distinct) = store._rows(
        "SELECT COUNT(*), COUNT(DISTINCT problem_key || '/' || sample) FROM verdicts WHERE run_id = 'killed-run'"
    )[0]
    assert count == distinct == TOTAL
    assert sorted(r.candidate_source for r in records) == sorted(f"# candidate {i}" for i in range(TOTAL))
