"""Correctness outputs through the host's device buffers (evaluate/device_outputs.py, worker/inbox.py).

The CPU tests cover what does not need CUDA: sealed handles, the signed result's `received` entries,
the judge comparing the host's buffers (CPU stand-ins) and refusing an entry it never offered, and a
worker that falls back to files. The `gpu` tests run whole verdicts through real CUDA IPC buffers.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from evalfixtures import fixture_source

from kbench.config import RunConfig
from kbench.evaluate.judge import WorkerOutcome, check_outputs
from kbench.evaluate.reference_cache import ReferenceData
from kbench.sandbox.offer import (
    LAYOUTS_FILE,
    RECEIVE_FILE,
    Receive,
    Slot,
    read_layouts,
    seal,
    unseal,
    write_layouts,
)
from kbench.sandbox.protocol import TensorFile, WorkerResult, read_result, write_result
from kbench.sandbox.tensorfiles import save_tensors
from kbench.types import Status

KEY = bytes(range(32))


def test_sealed_handles_open_only_with_the_jobs_key_and_their_place() -> None:
    handle = os.urandom(64)
    sealed = seal(KEY, "1000", 0, handle)
    assert bytes.fromhex(sealed) != handle
    assert unseal(KEY, "1000", 0, sealed) == handle
    assert unseal(bytes(32), "1000", 0, sealed) != handle  # another job's key
    assert unseal(KEY, "1000", 1, sealed) != handle  # another output's slot
    with pytest.raises(ValueError):
        unseal(KEY, "1000", 0, sealed[:-2])


def test_ipc_handles_keep_every_byte() -> None:
    from kbench.sandbox import devmem

    handle = bytes([0, 7, 0, 0, 255] + [0] * 59)  # real handles hold NUL bytes
    assert devmem._unpack(devmem._pack(handle)) == handle
    with pytest.raises(devmem.DeviceMemoryError):
        devmem._pack(handle[:-1])


def _received(shape: list[int]) -> TensorFile:
    return TensorFile(name="", digest="", device="cuda:0", dtype="float32", shape=shape, received=True)


def test_result_lists_received_outputs_without_files(tmp_path: Path) -> None:
    result = WorkerResult(outputs={"1000": [_received([2, 3])]})
    write_result(tmp_path, result, KEY)
    assert read_result(tmp_path, KEY) == result


class StandIn:
    """A Receiver whose 'device buffers' are CPU tensors (the judge's side of the protocol)."""

    device = "cpu"

    def __init__(self, buffers: dict[tuple[str, int], Any]) -> None:
        self.buffers = buffers

    def tensor(self, seed: str, index: int) -> Any:
        return self.buffers.get((seed, index))


def _judge(tmp_path: Path, receiver: Any, files: list[TensorFile]) -> WorkerOutcome:
    ref = ReferenceData(outputs={1000: [torch.ones(2, 3)]}, checksums={1000: ["c"]})
    result = WorkerResult(outputs={"1000": files}, input_checksums={"1000": ["c"]})
    return check_outputs(
        WorkerOutcome(Status.OK, result=result), tmp_path, ref, [1000], "cuda", 1e-4, (), receiver
    )


def test_judge_compares_the_hosts_buffer_not_what_the_worker_claims(tmp_path: Path) -> None:
    ok = _judge(tmp_path, StandIn({("1000", 0): torch.ones(2, 3)}), [_received([2, 3])])
    assert ok.status is Status.OK and ok.correctness is not None and ok.correctness.passed
    never_delivered = StandIn({("1000", 0): torch.full((2, 3), float("nan"))})  # as offered: NaN
    bad = _judge(tmp_path, never_delivered, [_received([2, 3])])
    assert bad.status is Status.MISMATCH
    forged = _judge(tmp_path, StandIn({}), [_received([2, 3])])  # a buffer the host never offered
    assert (forged.status, forged.rule) == (Status.CHEAT, "result-forged")
    assert _judge(tmp_path, None, [_received([2, 3])]).rule == "result-forged"


def test_outputs_in_files_and_buffers_mix(tmp_path: Path) -> None:
    ref = ReferenceData(outputs={7: [torch.ones(4), torch.zeros(3)]}, checksums={7: ["c"]})
    files = [_received([4]), *save_tensors(tmp_path, "out_7", [torch.zeros(3)], first=1)]
    assert files[1].name == "out_7_1.bin"
    files[1].device = "cuda:0"  # as a GPU worker would list it
    result = WorkerResult(outputs={"7": files}, input_checksums={"7": ["c"]})
    got = check_outputs(
        WorkerOutcome(Status.OK, result=result),
        tmp_path,
        ref,
        [7],
        "cuda",
        1e-4,
        (),
        StandIn({("7", 0): torch.ones(4)}),
    )
    assert got.status is Status.OK, got.message


def test_worker_falls_back_to_files_without_buffers(tmp_path: Path) -> None:
    from kbench.sandbox.inbox import Inbox

    (tmp_path / RECEIVE_FILE).write_text(Receive().model_dump_json())  # nothing offered
    inbox = Inbox(tmp_path, KEY)
    assert inbox.deliver("1000", 0, torch.ones(3)) is None and not inbox.failed
    slot = Slot(handle=seal(KEY, "1000", 0, bytes(64)), dtype="float32", shape=[3])
    (tmp_path / RECEIVE_FILE).write_text(Receive(slots={"1000": [slot]}).model_dump_json())
    inbox = Inbox(tmp_path, KEY)
    assert inbox.deliver("1000", 0, torch.ones(3)) is None  # a CPU output: to a file
    (tmp_path / RECEIVE_FILE).write_text("{not json")
    assert Inbox(tmp_path, KEY).failed.startswith("unreadable")


def test_reference_mirrors_are_shared_by_the_pools_copies_and_bounded() -> None:
    import dataclasses
    import gc

    from kbench.evaluate import device_outputs as do

    first = ReferenceData(outputs={1: [torch.ones(2)]})
    shared = dataclasses.replace(first, shared=True)  # what the reference pool hands out
    assert shared.device_outputs is first.device_outputs
    do.remember(first.device_outputs, 1, "cuda:0", ["a"], 60, cap=100)
    other = ReferenceData()
    do.remember(other.device_outputs, 2, "cuda:0", ["b"], 60, cap=100)  # past the cap: the oldest goes
    assert (1, "cuda:0") not in shared.device_outputs and other.device_outputs[(2, "cuda:0")] == ["b"]
    del first, shared, other
    gc.collect()
    lone = ReferenceData()
    do.remember(lone.device_outputs, 3, "cuda:0", ["c"], 60, cap=100)  # the dead reference's bytes are gone
    assert lone.device_outputs[(3, "cuda:0")] == ["c"]
    assert not any(seed == 2 for _, seed, _ in do._mirrors)  # forgotten with its reference


def test_layouts_come_from_tensors_or_the_signed_listing() -> None:
    from kbench.evaluate.device_outputs import layouts

    listing = {
        "5": [
            TensorFile(name="out_5_0.bin", digest="x", dtype="float16", shape=[2, 3]),
            TensorFile(name="old.pt", digest="x"),  # an old cache's pickle: no layout known
        ]
    }
    assert layouts(listing, [5, 6]) == {5: [("float16", [2, 3]), None], 6: []}
    tensors = {5: [torch.zeros(4, dtype=torch.bfloat16), 3]}
    assert layouts(tensors, [5]) == {5: [("bfloat16", [4]), None]}


def test_an_offer_that_cannot_be_made_is_still_written(tmp_path: Path) -> None:
    """Without a usable GPU the worker must not wait for ever: an empty offer sends its outputs to files."""
    from kbench.evaluate.device_outputs import Receiver

    if torch.cuda.is_available():
        pytest.skip("a GPU can take the offer (the gpu tests cover it)")
    receiver = Receiver("cuda:0")
    receiver.offer(tmp_path, {1000: [("float32", [2, 3])]})
    assert receiver.why and receiver.buffers == {}
    assert Receive.model_validate_json((tmp_path / RECEIVE_FILE).read_text()).slots == {}


@pytest.mark.slow
def test_the_references_layouts_reach_the_offer(tmp_path: Path) -> None:
    from evalfixtures import cpu_config

    from kbench.evaluate.plan import make_plan
    from kbench.evaluate.reference_run import get_reference
    from kbench.problems import get_problem

    cfg = cpu_config(tmp_path, measure=False)
    plan = make_plan(cfg, "cpu")
    seen: list[dict[int, list[Any]]] = []
    ref = get_reference(get_problem("kbench:2/1"), cfg, plan, tmp_path / "work", on_layouts=seen.append)
    (listing,) = seen  # once
    for seed in plan.fixed + plan.secret:
        (out,) = ref.outputs[seed]
        assert listing[seed] == [("float32", list(out.shape))]
    assert (tmp_path / "work" / "reference" / LAYOUTS_FILE).exists()  # signed by the worker itself


def test_the_references_layouts_are_signed(tmp_path: Path) -> None:
    outputs = {"1000": [torch.zeros(2, 3), 7], "2000": [torch.zeros(4, dtype=torch.float16)]}
    assert read_layouts(tmp_path, KEY) is None  # not written yet
    write_layouts(tmp_path, outputs, KEY)
    assert read_layouts(tmp_path, KEY) == {1000: [("float32", [2, 3]), None], 2000: [("float16", [4])]}
    assert read_layouts(tmp_path, bytes(32)) is None  # another key: not the reference's
    text = (tmp_path / LAYOUTS_FILE).read_text().replace("[2,3]", "[2000,3000]")
    (tmp_path / LAYOUTS_FILE).write_text(text)
    assert read_layouts(tmp_path, KEY) is None  # altered after signing (the candidate's files sit beside)


def test_layouts_are_delivered_once_early_or_from_the_result(tmp_path: Path) -> None:
    from kbench.evaluate.device_outputs import LayoutWatch

    got: list[dict[int, Any]] = []
    watch = LayoutWatch(tmp_path, KEY, {1000: [("float32", [1])]}, got.append)
    write_layouts(tmp_path, {"2000": [torch.zeros(5)]}, KEY)
    for _ in range(400):
        if got:
            break
        time.sleep(0.005)
    files = {"2000": [TensorFile(name="x", digest="", dtype="float32", shape=[5])]}
    watch.settle(files)  # already delivered: not again
    assert watch.early and got == [{1000: [("float32", [1])], 2000: [("float32", [5])]}]

    late: list[dict[int, Any]] = []
    watch = LayoutWatch(tmp_path / "none", KEY, {}, late.append)
    watch.settle(files)  # the worker signed no layouts: they come from its result
    assert not watch.early and late == [{2000: [("float32", [5])]}]

    def broken(_: Any) -> None:
        raise OSError("no space left on device")

    watch = LayoutWatch(tmp_path, KEY, {}, broken)  # the early delivery fails on its thread
    for _ in range(400):
        if watch.error is not None:
            break
        time.sleep(0.005)
    with pytest.raises(OSError, match="no space"):
        watch.settle(files)  # raised on the evaluating thread: the evaluation fails, the candidate ends


def test_a_candidate_beside_the_reference_times_only_once_settled(tmp_path: Path) -> None:
    """The candidate's referee waits for the host's word (referee/candidate.py: `settle`) before timing."""
    import threading

    from kbench.sandbox.offer import SETTLED_FILE, mark_settled, wait_for

    threading.Timer(0.3, mark_settled, (tmp_path,)).start()
    t0 = time.monotonic()
    wait_for(tmp_path / SETTLED_FILE)
    assert time.monotonic() - t0 >= 0.25 and (tmp_path / SETTLED_FILE).exists()
    budgets = RunConfig(reference_timeout_s=77.0).budgets("candidate")
    assert list(budgets)[-2:] == ["settle", "timing"] and budgets["settle"] == 77.0


def test_the_wait_for_buffers_has_its_own_budget() -> None:
    budgets = RunConfig(reference_timeout_s=123.0).budgets("candidate")
    assert list(budgets) == ["receive", "lease", "load", "build", "correctness", "settle", "timing"]
    assert budgets["receive"] == 123.0


def test_a_reference_offered_no_buffers_writes_every_output(tmp_path: Path, monkeypatch: Any) -> None:
    """The reference waits a bounded time for its offer, then (or with an empty one, or outputs not on a
    GPU) writes its outputs to files as before: never a reference that waits for ever or loses an output."""
    from kbench.problems import get_problem
    from kbench.sandbox.host import REFEREE, run_worker
    from kbench.sandbox.protocol import JobSpec

    spec = JobSpec(
        role="reference",
        problem=get_problem("kbench:2/1"),
        preset="small",
        dtype="fp32",
        device="cpu",
        seeds=[1000, 77],
        measure=False,
        receive=True,
        cache_seeds=[1000],
        offer_wait_s=0.2,
        budgets={"reference": 60.0, "load": 60.0},
    )
    for jobdir, offered in ((tmp_path / "none", False), (tmp_path / "empty", True)):
        jobdir.mkdir()
        (jobdir / "cache").mkdir()  # the cache entry's temporary folder: the fixed seed's file goes there
        if offered:
            (jobdir / RECEIVE_FILE).write_text(Receive().model_dump_json())
        t0 = time.monotonic()
        job = spec.model_copy(update={"cache_folder": str(jobdir / "cache")})
        exit_ = run_worker(REFEREE, jobdir, job, 120.0, key=KEY, start="spawn")
        result = read_result(jobdir, KEY, files=False)
        assert result is not None and not result.error, exit_.log_tail
        assert time.monotonic() - t0 < 30 and "deliver" in result.phases
        entries = {seed: f for seed, files in result.outputs.items() for f in files}
        assert set(entries) == {"1000", "77"} and not any(f.received for f in entries.values())
        for seed, folder in (("1000", jobdir / "cache"), ("77", jobdir)):
            f = entries[seed]
            assert (folder / f.name).stat().st_size == 4 * math.prod(f.shape), seed


def test_buffers_the_reference_did_not_fill_are_freed_at_once() -> None:
    from kbench.evaluate.device_outputs import Receiver

    receiver = Receiver("cuda:0")
    receiver.buffers = {
        ("1", 0): (1, 4, "float32", [1]),
        ("1", 1): (2, 4, "float32", [1]),
        ("2", 0): (3, 4, "float32", [1]),
    }
    receiver.keep_only({("1", 0), ("2", 0)})  # ("1", 1) went to a file (kept on the CPU)
    assert set(receiver.buffers) == {("1", 0), ("2", 0)}


# --- on a GPU: real buffers, real IPC -------------------------------------------------------------------


def _gpu_run(tmp_path: Path, source: str, **kw: Any) -> Any:
    from kbench.evaluate.flow import evaluate
    from kbench.problems import get_problem
    from kbench.types import Candidate

    problem = get_problem("kbench:2/1")
    base: dict[str, Any] = {
        "preset": "small",
        "device": "cuda",
        "backend": "triton",
        "baselines": ["eager"],
        "timing_budget_s": 0.5,
        "cache_dir": tmp_path,
    }
    base.update(kw)
    return evaluate(problem, Candidate(problem.key, "triton", source), RunConfig(**base))


@pytest.mark.gpu
def test_gpu_outputs_arrive_in_the_hosts_buffers_and_pass(tmp_path: Path) -> None:
    from kbench.evaluate import flow

    seen: list[WorkerResult] = []
    real = flow.run_candidate

    def spy(*args: Any, **kw: Any) -> Any:
        outcome = real(*args, **kw)
        seen.append(outcome.result)
        return outcome

    flow.run_candidate = spy  # type: ignore[assignment]
    try:
        v = _gpu_run(tmp_path, fixture_source("triton_honest.py"))
    finally:
        flow.run_candidate = real  # type: ignore[assignment]
    assert v.status is Status.OK, v.message + v.log_tail
    (result,) = seen
    order = list(result.phases)
    assert order.index("receive") < order.index("lease")  # never waits for the reference holding the GPU
    assert order.index("runner_cuda") < order.index(
        "lease"
    )  # its CUDA start came first, beside no timing loop
    assert order.index("settle") < order.index("timing")  # started beside the reference: timed once settled
    entries = [f for files in result.outputs.values() for f in files]
    assert entries and all(f.received for f in entries), result.warnings
    assert not any("went through files" in w for w in v.warnings), v.warnings
    off = _gpu_run(tmp_path, fixture_source("triton_honest.py"), device_outputs=False)
    assert off.status is Status.OK and off.correctness is not None
    assert v.correctness is not None and v.correctness.max_abs_err == pytest.approx(
        off.correctness.max_abs_err, abs=1e-6
    )


@pytest.mark.gpu
def test_gpu_wrong_values_and_wrong_shapes_are_caught_as_before(tmp_path: Path) -> None:
    honest = fixture_source("triton_honest.py")
    wrong = honest.replace("return out", "return out * 1.5 + 0.1")
    v = _gpu_run(tmp_path, wrong, measure=False)
    assert v.status is Status.MISMATCH and "expected" in v.message, v.message
    shape = honest.replace("return out", "return out[:, :-1]")
    v = _gpu_run(tmp_path, shape, measure=False)
    assert v.status is Status.MISMATCH and "shape" in v.message, v.message
    cpu = honest.replace("return out", "return out.cpu()")
    v = _gpu_run(tmp_path, cpu, measure=False)
    assert (v.status, v.rule) == (Status.MISMATCH, "output-device"), v.message


@pytest.mark.gpu
def test_gpu_premirror_copies_once_and_the_judge_reuses_it() -> None:
    from kbench.evaluate.device_outputs import mirrored, premirror

    ref = ReferenceData(outputs={1: [torch.arange(6.0)], 2: [torch.ones(3), 5]}, checksums={})
    premirror(ref, [1, 2, 3], "cuda:0")  # 3: a seed the reference does not hold is skipped
    held = ref.device_outputs[(1, "cuda:0")]
    assert held[0].is_cuda and torch.equal(held[0].cpu(), torch.arange(6.0))
    assert mirrored(ref, 1, "cuda:0") is held  # the judge's lookup: no second copy
    assert ref.device_outputs[(2, "cuda:0")][1] == 5 and (3, "cuda:0") not in ref.device_outputs


@pytest.mark.gpu
def test_gpu_buffers_start_as_nan_in_every_float_format() -> None:
    from kbench.sandbox import devmem

    for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
        nbytes = 1000 * dtype.itemsize
        ptr = devmem.alloc("cuda:0", nbytes)
        try:
            devmem.fill_nan("cuda:0", ptr, nbytes)
            view = devmem.view(ptr, nbytes, dtype, [10, 100], "cuda:0")
            assert bool(torch.isnan(view).all()), dtype
        finally:
            devmem.free("cuda:0", ptr)


@pytest.mark.gpu
def test_gpu_reference_outputs_arrive_in_the_hosts_buffers(tmp_path: Path) -> None:
    """The reference copies its outputs into the host's buffers before it gives up the GPU: the host reads
    no file of them, writes the fixed seeds' to the cache (checked), and judges as it did through files."""
    from kbench.evaluate import flow

    seen: list[ReferenceData] = []
    real = flow.get_reference

    def spy(*args: Any, **kw: Any) -> Any:
        data = real(*args, **kw)
        seen.append(data)
        return data

    flow.get_reference = spy  # type: ignore[assignment]
    try:
        v = _gpu_run(tmp_path, fixture_source("triton_honest.py"))
        (ref,) = seen
        assert "deliver" in ref.phases and not ref.cache_hit
        assert all(t.is_cuda for outs in ref.outputs.values() for t in outs), "all on the device"
        assert v.status is Status.OK, v.message + v.log_tail
        again = _gpu_run(tmp_path, fixture_source("triton_honest.py"))  # the fixed seeds from the cache
        assert seen[1].cache_hit and again.status is Status.OK, again.message
        fixed = [seed for seed, outs in seen[1].outputs.items() if not outs[0].is_cuda]
        assert len(fixed) == RunConfig().seeds  # read from the cache's files, the rest delivered
    finally:
        flow.get_reference = real  # type: ignore[assignment]
    off = _gpu_run(tmp_path / "off", fixture_source("triton_honest.py"), device_outputs=False)
    assert off.status is Status.OK and off.correctness is not None and v.correctness is not None
    assert v.correctness.max_abs_err == pytest.approx(off.correctness.max_abs_err, abs=1e-6)


@pytest.mark.gpu
def test_gpu_an_offer_starts_the_hosts_torch_cuda_meanwhile(tmp_path: Path) -> None:
    """In a fresh host process, offering buffers starts torch's CUDA state on a thread, so the comparison
    that follows does not pay for it; nothing else touched torch.cuda there."""
    import subprocess
    import sys

    script = (
        "import sys, time, torch\n"
        "from pathlib import Path\n"
        "from kbench.evaluate.device_outputs import Receiver\n"
        "assert not torch.cuda.is_initialized()\n"
        "with Receiver('cuda:0') as r:\n"
        "    r.offer(Path(sys.argv[1]), {1000: [('float32', [4, 4])]})\n"
        "    assert r.buffers, r.why\n"
        "    deadline = time.monotonic() + 20\n"
        "    while not torch.cuda.is_initialized() and time.monotonic() < deadline:\n"
        "        time.sleep(0.01)\n"
        "    print('initialized' if torch.cuda.is_initialized() else 'not initialized')\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 0 and "initialized" in done.stdout.split(), done.stderr[-2000:]
    assert "not initialized" not in done.stdout
