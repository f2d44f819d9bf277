"""What a timed batch costs beyond its calls' work, measured by trusted code (referee/timing.py deducts it).

A batch's window on the referee's clock holds more than its calls: the command's way to the runner and
the answer's way back, the waking of both processes, the device's switch from the referee's work to the
runner's and its first launch, and after it the snapshot's switch back. `calibrate` measures these on
batches of known work that run as the loop's batches do, on the job's own runner, before the candidate
is imported (a reference's runner is trusted throughout).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

from kbench.referee.copies import L2, Copier

_ns = time.perf_counter_ns

CALIBRATION_ROUNDS = 8  # calibration batches (`calibrate`); the first few are not kept
CALIBRATION_SKIPPED = 2
IDLE_S = 0.002  # how long a calibration batch's runner waits first, as the referee's work between batches
WORK_S = 0.002  # about how long a calibration batch's device work runs, as a batch's calls do


@dataclass(frozen=True)
class Calibration:
    """What a timed batch costs beyond its calls' work (`calibrate`), deducted from each batch."""

    overhead_s: float = 0.0  # the Run's window beyond the calls' work
    copy_s: float = 0.0  # the round trip of a Copy of nothing
    switch_s: float = 0.0  # the snapshot beyond its own copy: the device switching back to the referee


def _own_work(tensor: Any, repeat: int, device: str) -> float:
    """What `repeat` in-place adds over a tensor like `tensor` take the referee itself (the fastest of 3)."""
    import torch

    scratch = torch.zeros_like(tensor)
    best = math.inf
    for _ in range(3):
        if device.startswith("cuda"):
            torch.cuda.synchronize(device)
        t0 = _ns()
        for _ in range(repeat):
            scratch.add_(1.0)
        if device.startswith("cuda"):
            torch.cuda.synchronize(device)
        best = min(best, (_ns() - t0) / 1e9)
    return best


def calibrate(link: Any, feed: Any, flush_l2: bool = True) -> Calibration:
    """Batches of known work that run as the loop's batches do: the runner idle a moment, the referee's own
    device work (the L2 flush) right before the command; then the runner adds 1 to a calibration slot
    `repeat` times (about `WORK_S` of device work, as a batch's calls), synchronises and answers, is sent a
    Copy of nothing (its round trip is `copy_s`), and the referee snapshots the slot. A window less what the same adds take the referee itself, in its own
    process, is the batch's cost beyond its work: the command's way both ways, the waking, the device's
    switch to the runner's work and its first launch. The least of those is `overhead_s`; the least
    snapshot beyond the referee's own copy, the switch back, `switch_s`. On a GPU under the device's
    timing lock, as the loop (sandbox/timinglock.py): no other job's timing runs beside it.

    Measured while the runner holds only kbench's code (before a candidate's import; a reference's runner
    throughout), so a candidate cannot make it larger. A runner that later answers faster than its trusted
    self gains at most its own part of `overhead_s` per batch."""
    if not feed.device.startswith("cuda"):
        return _calibrate(link, feed, flush_l2)
    from kbench.sandbox import lease, timinglock

    with timinglock.timing_window(lease.device_id(feed.device)):
        return _calibrate(link, feed, flush_l2)


def _calibrate(link: Any, feed: Any, flush_l2: bool) -> Calibration:
    slot = feed.calibration_slot()
    tensor, device = slot.tensors[0], feed.device
    repeat = max(1, min(1000, round(WORK_S / max(_own_work(tensor, 1, device), 1e-6))))
    work_s = _own_work(tensor, repeat, device)
    copier = Copier([slot], device)
    l2 = L2(device, flush_l2)
    windows, copies, snapshots = [], [], []
    for _ in range(CALIBRATION_ROUNDS):
        time.sleep(IDLE_S)  # the runner idle while the referee works, then the referee's device work
        l2.flush()
        feed.ready()
        t0 = _ns()
        link.run([], "", [slot.ident], repeat)
        t1 = _ns()
        link.copy([])
        t2 = _ns()
        copier.snapshot([slot])
        t3 = _ns()
        windows.append((t1 - t0) / 1e9 - work_s)
        copies.append((t2 - t1) / 1e9)
        snapshots.append((t3 - t2) / 1e9)
    # the least of each, not a middle value: what every batch costs at least, so that a batch's deduction
    # does not exceed its own costs and a call's time is not understated where its work is small
    kept = slice(CALIBRATION_SKIPPED, None)
    return Calibration(
        overhead_s=max(0.0, min(windows[kept])),
        copy_s=min(copies[kept]),
        switch_s=max(0.0, min(snapshots[kept]) - copier.seconds),
    )
