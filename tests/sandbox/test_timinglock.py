"""The device's timing lock: a runner's CUDA start before its lease only while no timing loop runs (its
referee holds the lock shared meanwhile), and a loop that waits for a start in progress
(sandbox/timinglock.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kbench.sandbox import lease, timinglock


@pytest.fixture
def one_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A lease folder of this test's own and a device named as one GPU."""
    monkeypatch.setenv(lease.DIR_ENV, str(tmp_path / "leases"))
    monkeypatch.setattr(lease, "device_id", lambda device: "gpu-test")
    return "cuda:0"


def test_an_early_cuda_start_runs_only_while_no_timing_loop_does(one_gpu: str) -> None:
    with timinglock.shared_window(one_gpu) as early:
        assert early  # nothing times: the runner starts CUDA before the lease
        with timinglock.shared_window(one_gpu) as again:
            assert again  # shared: several runners may start at once
    with timinglock.timing_window("gpu-test") as taken:
        assert taken
        t0 = time.monotonic()
        with timinglock.shared_window(one_gpu) as early:
            assert not early  # a loop runs: nothing done, and no wait
        assert time.monotonic() - t0 < 0.5
    with timinglock.shared_window(one_gpu) as early:
        assert early  # the loop is over
    assert not list((Path(os.environ[lease.DIR_ENV])).glob("*.lock"))  # no lease of its own: not listed


def test_a_runners_phases_are_shown_and_not_added_to_its_jobs() -> None:
    from kbench.evaluate.phases import Account

    acct = Account()
    acct.worker("cand", {"wall": 2.0, "runner_cuda": 0.3, "setup": 0.8, "timing": 0.6, "runner_import": 0.5})
    assert acct.nested["cand:runner_cuda"] == 0.3  # shown
    assert acct.nested["cand:start"] == 0.6  # 2.0 - 0.8 - 0.6: the runner's phases ran inside its referee's


HOLDS_SHARED = """
import fcntl, os, sys, time
from pathlib import Path
fd = os.open(Path(sys.argv[1]) / "gpu-test.timing", os.O_CREAT | os.O_RDWR)
fcntl.flock(fd, fcntl.LOCK_SH)  # as an early CUDA start does
print("held", flush=True)
time.sleep(float(sys.argv[2]))
"""


def test_a_timing_loop_waits_for_a_cuda_start_in_progress_then_runs(one_gpu: str, tmp_path: Path) -> None:
    folder = Path(os.environ[lease.DIR_ENV])
    folder.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen([sys.executable, "-c", HOLDS_SHARED, str(folder), "0.6"], stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline().strip() == b"held"
    t0 = time.monotonic()
    with timinglock.timing_window("gpu-test", wait_s=10.0) as taken:
        waited = time.monotonic() - t0
    proc.wait(timeout=30)
    assert taken and 0.2 < waited < 5.0  # held back until the start was done, not beside it
    # one that never ends keeps a loop back only `wait_s`: the loop then runs and says so
    stuck = subprocess.Popen([sys.executable, "-c", HOLDS_SHARED, str(folder), "60"], stdout=subprocess.PIPE)
    try:
        assert stuck.stdout is not None and stuck.stdout.readline().strip() == b"held"
        t0 = time.monotonic()
        with timinglock.timing_window("gpu-test", wait_s=0.3) as taken:
            assert not taken and time.monotonic() - t0 < 2.0
    finally:
        stuck.kill()
        stuck.wait()


def test_a_cpu_timing_loop_takes_no_timing_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from kbench.referee.feed import Feed
    from kbench.referee.local import LocalLink
    from kbench.referee.timing import time_runner
    from kbench.sandbox.commands import OutputMeta
    from kbench.types import TimingSettings

    monkeypatch.setenv(lease.DIR_ENV, str(tmp_path / "leases"))
    # a budget the loop's 5 batches never reach, even on a loaded machine: it stops when they are done
    settings = TimingSettings(budget_s=5.0, warmup_s=0.01, min_time_s=0.01, min_runs=5)
    feed = Feed(lambda: [torch.ones(4)], "cpu", "fp32", lambda slots: None)
    layout = [OutputMeta(dtype="float32", shape=[4], device="cpu")]
    loop = time_runner(LocalLink(lambda x: x + 1, feed), feed, layout, settings)
    assert loop.stats.n >= 5 and loop.stats.loop is not None and not loop.stats.loop.timing_lock_busy
    assert not (tmp_path / "leases").exists()


EARLY = """
import sys, torch
from kbench.sandbox import lease, timinglock
with_loop = sys.argv[1] == "loop"
if with_loop:
    window = timinglock.timing_window(lease.device_id("cuda:0"))
    assert window.__enter__()
    import subprocess
    probe = "from kbench.sandbox import timinglock\\nwith timinglock.shared_window('cuda:0') as t: print(t)"
    other = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    print("beside a loop", other.stdout.strip())
with timinglock.shared_window("cuda:0") as taken:
    print("alone", taken)
"""


@pytest.mark.gpu
def test_gpu_a_worker_starts_cuda_early_unless_a_loop_times(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(lease.DIR_ENV, str(tmp_path / "leases"))
    out = subprocess.run([sys.executable, "-c", EARLY, "alone"], capture_output=True, text=True, timeout=120)
    assert "alone True" in out.stdout, out.stderr[-2000:]
    out = subprocess.run([sys.executable, "-c", EARLY, "loop"], capture_output=True, text=True, timeout=120)
    assert "beside a loop False" in out.stdout, out.stdout + out.stderr[-2000:]
