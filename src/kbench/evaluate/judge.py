"""Host side: turn a worker's exit, its (verified) result and the reference data into one status.

Order of precedence: timeout > forged result > crash (no result) > the job's own failure status (decided by
its referee, the checked timed calls' included) > structural/value mismatch on the correctness seeds > child
process left behind > speed of light > calls run together.
"""

from __future__ import annotations

import signal
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kbench.config import PHASE_SETTINGS
from kbench.errors import WorkerError
from kbench.evaluate.device_outputs import Receiver, mirrored
from kbench.problems.compare import Comparison, compare, seed_label, summarize_correctness
from kbench.sandbox.host import WorkerExit
from kbench.sandbox.protocol import ForgedResult, TensorFile, WorkerResult, read_result
from kbench.sandbox.tensorfiles import load_tensors
from kbench.types import Correctness, Status, TimingStats

_OOM_MARKERS = ("MemoryError", "std::bad_alloc", "Cannot allocate memory", "OutOfMemoryError")


@dataclass
class WorkerOutcome:
    status: Status
    message: str = ""
    rule: str = ""
    result: WorkerResult | None = None
    correctness: Correctness | None = None
    warnings: list[str] = field(default_factory=list)
    log_tail: str = ""
    generalizes: bool | None = None  # correct at hidden sizes too (evaluate/hidden.py); None: not checked
    hidden: str = ""  # what the hidden-shape check did, for the records


def crash_message(code: int | None) -> str:
    """How a worker that wrote no result ended (its exit code or the signal that killed it)."""
    if code is not None and code < 0:
        try:
            return f"worker killed by {signal.Signals(-code).name} before writing a result"
        except ValueError:
            return f"worker killed by signal {-code} before writing a result"
    return f"worker exited with code {code} without writing a result"


BUDGET_SETTINGS = PHASE_SETTINGS  # the setting behind each phase's budget, named in a timeout's message


def read_worker(exit_: WorkerExit, jobdir: Path) -> WorkerOutcome:
    """The first verdict layer: did the worker finish and sign a result? A worker that ran out of time
    before its job's own phases began, or that reports kbench's own failure, raises WorkerError."""
    if exit_.timed_out:
        setting = BUDGET_SETTINGS.get(exit_.phase)
        if setting is None:  # start-up or the lease wait: kbench's time, not the candidate's
            raise WorkerError(
                f"a worker spent {exit_.seconds:.0f} s in its {exit_.phase} phase (limit {exit_.budget_s:.0f} s) "
                f"before running anything of the job; log tail:\n{exit_.log_tail}"
            )
        return WorkerOutcome(
            Status.TIMEOUT,
            f"{exit_.phase} ran past its budget of {exit_.budget_s:.0f} s ({setting}); its session was killed",
            exit_.phase,
        )
    try:
        result = read_result(jobdir, exit_.key)
    except ForgedResult as exc:
        return WorkerOutcome(Status.CHEAT, f"result file rejected: {exc}", "result-forged")
    if result is not None and result.error:
        raise WorkerError(result.error)
    if result is None:
        if any(m in exit_.log_tail for m in _OOM_MARKERS):
            return WorkerOutcome(Status.OOM, "worker ran out of memory (memory limit) without a result")
        return WorkerOutcome(Status.CRASHED, crash_message(exit_.returncode))
    if result.status is not Status.OK:
        return WorkerOutcome(result.status, result.message, result.rule, result)
    return WorkerOutcome(Status.OK, result=result)


def _compare_seed(
    seed: str, outs: list[Any], refs: list[Any], devices: list[str], expect_device: str, tol: float
) -> list[Comparison]:
    if len(outs) != len(refs):
        return [Comparison(False, "output-shape", report=f"{len(outs)} outputs, expected {len(refs)}")]
    comps = []
    for out, ref, dev in zip(outs, refs, devices, strict=True):
        if dev.split(":")[0] != expect_device.split(":")[0]:
            comps.append(
                Comparison(False, "output-device", report=f"output on {dev}, expected {expect_device}")
            )
        else:
            comps.append(compare(out, ref, tol))
    return comps


def check_outputs(
    outcome: WorkerOutcome,
    jobdir: Path,
    ref: Any,
    seeds: list[int],
    device: str,
    tol: float,
    secret: Collection[int] = (),
    receiver: Receiver | None = None,
) -> WorkerOutcome:
    """Compare the candidate's outputs (and input checksums) with the reference for each seed; messages
    name the seeds in `secret` only as "a secret seed" (compare.summarize_correctness says why). Outputs
    listed as `received` are the host's device buffers of `receiver`, compared on that device."""
    result = outcome.result
    assert result is not None
    per: list[tuple[int, Comparison]] = []
    for seed in seeds:
        label = seed_label(seed, secret)
        files = result.outputs.get(str(seed))
        if files is None:
            return WorkerOutcome(Status.CRASHED, f"no output for {label}", result=result)
        if result.input_checksums.get(str(seed)) != ref.checksums.get(seed):
            msg = f"inputs for {label} differ from the reference's (random state or inputs tampered)"
            return WorkerOutcome(Status.CHEAT, msg, "inputs-mutated", result)
        outs = _outputs(str(seed), files, jobdir, receiver)
        if outs is None:
            msg = f"{label}: an output is listed in a device buffer the host never offered"
            return WorkerOutcome(Status.CHEAT, msg, "result-forged", result)
        refs = ref.outputs[seed]
        if any(f.received for f in files):
            assert receiver is not None
            refs = mirrored(ref, seed, receiver.device)
        comps = _compare_seed(str(seed), outs, refs, [f.device for f in files], device, tol)
        per.extend((seed, c) for c in comps)
        structural = next((c for c in comps if c.rule), None)
        if structural is not None:
            msg = f"{label}: {structural.report}"
            return WorkerOutcome(
                Status.MISMATCH, msg, structural.rule, result, summarize_correctness(per, secret)
            )
    correctness = summarize_correctness(per, secret)
    if not correctness.passed:
        return WorkerOutcome(Status.MISMATCH, correctness.report, "", result, correctness)
    return WorkerOutcome(Status.OK, result=result, correctness=correctness)


def _outputs(seed: str, files: list[TensorFile], jobdir: Path, receiver: Receiver | None) -> list[Any] | None:
    """A seed's outputs: mapped files, and for `received` ones the host's buffer (None: one not offered)."""
    outs = []
    for i, f in enumerate(files):
        if not f.received:
            outs.extend(load_tensors(jobdir, [f]))
            continue
        buffer = receiver.tensor(seed, i) if receiver is not None else None
        if buffer is None:
            return None
        outs.append(buffer)
    return outs


def check_timing(outcome: WorkerOutcome, sol_ms: float | None) -> WorkerOutcome:
    """The speed-of-light floor: a time its referee measured below it is physically impossible."""
    result = outcome.result
    assert result is not None and result.timing is not None
    if sol_ms is not None and result.timing.min_ms < sol_ms:
        msg = (
            f"fastest batch {result.timing.min_ms:.4g} ms per call is below the speed-of-light floor {sol_ms:.4g} ms"
            " (every output byte written once at peak bandwidth, or half the compute at peak rate)"
        )
        return WorkerOutcome(Status.CHEAT, msg, "beyond-speed-of-light", result, outcome.correctness)
    return outcome


# The batch-together rule (`check_batching`): calls made one after another overlap at most one call's launch
# with another's kernel, so a call alone takes at most about twice a call's time in batches; beyond
# TOGETHER_RATIO times, plus TOGETHER_MARGIN_MS, the batches ran their calls together. A call alone is noisy
# (25 % between runs): on an H100 with batches at their target length (referee/timing.py `_probe`) honest
# launch-bound calls reached 4.33 and the attack 2.7-12.5, so the limit is above every honest call measured
# (benchmarks/results/h100/batch-together.md)
TOGETHER_RATIO = 6.0
TOGETHER_MARGIN_MS = 0.005


def check_batching(outcome: WorkerOutcome, reference: TimingStats | None, device: str) -> WorkerOutcome:
    """`cheat batch-together` when a call alone (the loop's `single_call_ms`, the least of its one-call
    batches) took more than TOGETHER_RATIO times the candidate's time per call in batches: a runner whose
    batch's calls were computed together (one launch over every call's inputs) pays one call's launch per
    batch, not per call. From the call alone is taken what a call alone costs the reference beyond its own
    time per call (`reference`, the eager baseline's loop): what the referee's per-batch costs and a cold
    device add to any call alone. On a GPU only: on a CPU a batch's fixed costs vary by more than a small
    call's time (a warning says the rule was off where it cannot be applied)."""
    result = outcome.result
    timing = result.timing if result is not None else None
    if timing is None or not device.startswith("cuda") or not timing.meaningful:
        return outcome
    alone = timing.loop.single_call_ms if timing.loop is not None else None
    if alone is None:  # a batch of one call: nothing to set against
        return outcome
    base = reference.loop.single_call_ms if reference is not None and reference.loop is not None else None
    if reference is None or base is None:
        outcome.warnings.append("batch-together rule off: the reference's call alone is not on record")
        return outcome
    beyond = max(0.0, base - reference.median_ms)
    limit = TOGETHER_RATIO * timing.median_ms + TOGETHER_MARGIN_MS
    if alone - beyond > limit:
        msg = (
            f"a call alone took {alone:.4g} ms ({alone - beyond:.4g} ms beyond what a call alone costs the "
            f"reference), over {TOGETHER_RATIO:g}x its {timing.median_ms:.4g} ms per call in batches: calls "
            "made one after another overlap at most a launch with a kernel, so its batches' calls were "
            "computed together"
        )
        return WorkerOutcome(
            Status.CHEAT, msg, "batch-together", result, outcome.correctness, outcome.warnings
        )
    return outcome
