"""The candidate worker: `python -m kbench.worker.candidate JOBDIR` — the only entry that runs candidate code.

Order matters: the HMAC key is read (stdin, or the starter's FIFO), the process confines itself
(sandbox/confine.py: Landlock, where the kernel has it), the clocks are bound
(kbench.worker.timing), the load_inline cache and call recorders are installed and the
global-state/timer/reference snapshots are taken, all *before* the candidate is imported. Then: build `ModelNew` under the reference's init
seed, run one forward per seed on fresh inputs (checksummed before/after; outputs checked for type,
aliasing), profile one forward for the candidate's own kernels, and time it while sampling outputs.
Outputs go to JOBDIR as tensor files; the expected outputs never enter this process. The result is
signed.

This process is untrusted once the candidate is imported: everything it reports after that point is
re-checked by the host where possible (outputs, sampled outputs), and the rest (guards, kernel use) is
best effort against a candidate that can inspect this process's memory.
"""

from __future__ import annotations

import functools
import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kbench.sandbox import confine, lease, procs, timinglock
from kbench.sandbox.protocol import JOB_FILE, JobSpec, WorkerResult, announce, read_key, write_result
from kbench.sandbox.tensorfiles import save_tensors
from kbench.types import Status
from kbench.worker.sampling import disguise, sample_outputs

BUILD_NICE = 10  # a build job's niceness (main)


class Stop(Exception):
    """Ends the job early with this status (a candidate failure, reported as data)."""

    def __init__(self, status: Status, message: str, rule: str = "") -> None:
        super().__init__(message)
        self.status, self.message, self.rule = status, message, rule


def _failure(exc: BaseException, default: Status) -> Stop:
    import torch

    if isinstance(exc, torch.OutOfMemoryError | MemoryError):
        return Stop(Status.OOM, f"{type(exc).__name__}: {exc}"[:2000])
    tb = "".join(traceback.format_exception(exc)[-8:])
    return Stop(default, f"{type(exc).__name__}: {exc}\n{tb}"[-4000:])


def _require_plain(values: list[Any]) -> None:
    """Every timed call returns plain tensors, as the correctness calls had to: a lazy subclass returned only
    once timing starts would be timed doing nothing and computed when sampled."""
    import torch

    for i, value in enumerate(values):
        if type(value) is not torch.Tensor:
            what = type(value).__qualname__
            raise Stop(
                Status.CHEAT, f"a timed call's output {i} is a {what}, not torch.Tensor", "tensor-subclass"
            )


class CandidateJob:
    def __init__(self, spec: JobSpec, jobdir: Path, key: bytes = b"") -> None:
        import torch

        from kbench.backends import KernelRecorder, get_backend
        from kbench.problems.inputs import ieee_numerics
        from kbench.worker import consistency, inbox, timing  # noqa: F401  (bound before the candidate)
        from kbench.worker.guards import Guards

        self.spec, self.jobdir, self.key = spec, jobdir, key
        self.device = torch.device(spec.device)
        self.result = WorkerResult()
        # The CUDA start beside the rest of the set-up, and beside the reference's CPU work rather than after
        # its GPU phase under this worker's lease (unless a timing loop runs now: sandbox/timinglock.py).
        cuda = timinglock.EarlyCuda(spec.device) if lease.required(spec.role, spec.device) else None
        ieee_numerics()
        torch.set_grad_enabled(False)
        timing.pin_threads(spec.timing)
        self.inbox: Any = None  # worker/inbox.py: the host's device buffers for the correctness outputs
        self.backend = get_backend(spec.backend)
        self.recorder = KernelRecorder()
        self.backend.install_hooks(self.recorder, Path(spec.cache_dir))
        self.module: Any = None
        self.model: Any = None
        self.guards: Guards | None = None
        if spec.role == "build":
            return  # a build job only imports the candidate: nothing is judged, no snapshot needed
        if spec.backend == "triton":
            import triton.testing  # noqa: F401  (so do_bench is in the timer snapshot)
        if cuda is not None:  # done before the guard snapshots and before anything of the candidate
            seconds = cuda.join()
            if seconds is not None:
                self.result.phases["cuda"] = seconds
        self.guards = Guards()

    def guard(self, when: str) -> None:
        if self.guards is None:
            return
        hit = self.guards.violation(when)
        if hit is not None:
            raise Stop(Status.CHEAT, hit[1], rule=hit[0])

    def import_candidate(self) -> None:
        import importlib.util

        path = Path(self.spec.candidate_file)
        spec = importlib.util.spec_from_file_location("kbench_candidate", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["kbench_candidate"] = module
        try:
            spec.loader.exec_module(module)
        except (Exception, SystemExit) as exc:
            raise _failure(
                exc, Status.BUILD_ERROR if self.recorder.build_failed else Status.LOAD_ERROR
            ) from None
        finally:
            self.result.build_seconds = round(self.recorder.build_seconds, 3)
            self.result.build_cache_hit = self.recorder.cache_hit
            self.result.build_recipe = str(self.recorder.extra.get("build_recipe", ""))
            self.result.build_log = self.recorder.build_log
        self.module = module
        self.guard("import")

    def build_model(self, loaded: Any) -> None:
        import torch

        from kbench.problems.inputs import TORCH_DTYPES

        cls = getattr(self.module, "ModelNew", None)
        if not isinstance(cls, type):
            raise Stop(Status.LOAD_ERROR, "the candidate defines no class ModelNew")
        try:
            torch.manual_seed(self.spec.init_seed)
            init = loaded.get_init_inputs()
            torch.manual_seed(self.spec.init_seed)
            model = cls(*init).to(self.device)
            if self.spec.dtype != "fp32":
                model = model.to(TORCH_DTYPES[self.spec.dtype])
        except (Exception, SystemExit) as exc:
            raise _failure(
                exc, Status.BUILD_ERROR if self.recorder.build_failed else Status.LOAD_ERROR
            ) from None
        self.model = model
        self.guard("construction")

    def forward(self, inputs: list[Any]) -> list[Any]:
        import torch

        from kbench.problems.inputs import flatten_outputs

        try:
            out = self.model(*inputs)
            if self.device.type == "cuda":
                torch.cuda.synchronize()
        except (Exception, SystemExit) as exc:
            raise _failure(exc, Status.RUNTIME_ERROR) from None
        return flatten_outputs(out)

    def check_outputs(self, outs: list[Any], inputs: list[Any], before: list[str]) -> None:
        import torch

        from kbench.worker.checksums import checksum, shares_storage

        for i, out in enumerate(outs):
            if type(out) is not torch.Tensor:
                raise Stop(
                    Status.CHEAT,
                    f"output {i} is a {type(out).__qualname__}, not torch.Tensor",
                    "tensor-subclass",
                )
            for j, x in enumerate(inputs):
                if isinstance(x, torch.Tensor) and shares_storage(out, x):
                    raise Stop(
                        Status.CHEAT, f"output {i} shares storage with input {j}", "output-aliases-input"
                    )
        after = checksum(inputs)
        changed = [j for j, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]
        if changed:
            raise Stop(Status.CHEAT, f"forward modified input(s) {changed}", "inputs-mutated")

    def receive(self) -> None:
        """Wait for the host's device buffers (sandbox/offer.py), which it offers once the reference's
        outputs are known. A CUDA start here could come beside a reference still timing its baselines (it
        lengthened that loop from ~0.5 s to 0.75-1.3 s on an H200 host): CUDA started at the worker's
        start if no loop ran then (`early_cuda`), else starts under the lease."""
        from kbench.worker.inbox import Inbox

        self.inbox = Inbox(self.jobdir, self.key)

    def wait_settled(self) -> None:
        """Wait for the host's word that the reference beside this worker has written its outputs and the
        host has read them (sandbox/offer.py SETTLED_FILE)."""
        from kbench.sandbox.offer import SETTLED_FILE, wait_for

        wait_for(self.jobdir / SETTLED_FILE)

    def correctness(self, loaded: Any) -> None:
        from kbench.problems.inputs import make_inputs
        from kbench.worker.checksums import checksum

        for seed in self.spec.seeds:
            inputs = make_inputs(loaded.get_inputs, seed, self.device, self.spec.dtype)
            before = checksum(inputs)
            self.result.input_checksums[str(seed)] = before
            outs = self.forward(inputs)
            self.check_outputs(outs, inputs, before)
            self.result.outputs[str(seed)] = self.keep(str(seed), outs)
            self.guard("forward")
        if self.inbox is not None:
            self.inbox.close()
            if self.inbox.failed:
                self.result.warnings.append(f"outputs went through files: {self.inbox.failed}")

    def keep(self, seed: str, outs: list[Any]) -> list[Any]:
        """Each output into the host's device buffer for it where there is one, else into a file."""
        if self.inbox is None:
            return save_tensors(self.jobdir, f"out_{seed}", outs)
        return [
            self.inbox.deliver(seed, i, out) or save_tensors(self.jobdir, f"out_{seed}", [out], first=i)[0]
            for i, out in enumerate(outs)
        ]

    def kernel_use(self, loaded: Any) -> None:
        from kbench.backends.profile import cpu_calls, gpu_kernels
        from kbench.problems.inputs import make_inputs

        inputs = make_inputs(loaded.get_inputs, self.spec.seeds[0], self.device, self.spec.dtype)
        names = set(self.spec.kernel_names) | self.recorder.defined
        if self.device.type == "cuda":
            use = gpu_kernels(lambda: self.model(*inputs), names)
        else:
            use = cpu_calls(lambda: self.model(*inputs), self.recorder)
        self.result.kernels_ran = list(use.ran)
        self.result.kernel_share = use.share
        if not use.ran:
            seen = f"; device kernels that ran: {', '.join(use.library)}" if use.library else ""
            raise Stop(
                Status.CHEAT,
                f"none of the candidate's own kernels ran during forward{seen}",
                "no-custom-kernel",
            )

    def compile_check(self) -> None:
        launches = self.recorder.extra.get("triton_launches")
        if not launches:
            return
        from kbench.backends.tritoncheck import compile_in_clean_process

        arch = self.spec.compile_arch
        check = compile_in_clean_process(
            launches, self.spec.candidate_file, self.jobdir, self.spec.cache_dir, arch
        )
        self.result.build_log = (self.result.build_log + "\n" + check.log).strip()
        if not check.ok:
            raise Stop(Status.BUILD_ERROR, f"Triton kernel does not compile for {arch}:\n{check.log}"[-4000:])

    def measure(self, loaded: Any) -> None:
        from kbench.problems.inputs import flatten_outputs, make_inputs
        from kbench.worker.consistency import Consistency
        from kbench.worker.timing import Reservoir, time_callable

        sets = [
            make_inputs(loaded.get_inputs, s, self.device, self.spec.dtype) for s in self.spec.timing_seeds
        ]

        kept: dict[int, tuple[int, int, list[Any]]] = {}  # reservoir slot -> (call, set, outputs)

        def keep(call: int, k: int, out: Any, slot: int) -> None:
            # Copied (or sampled) now, written after the timed calls: writing (a 1 GiB output takes
            # seconds) inside the loop stalled the process between timed calls and ate the loop's budget.
            kept[slot] = (call, k, sample_outputs(flatten_outputs(out), self.spec.sample_whole_bytes))

        consistent = Consistency()

        def plain(call: int, k: int, out: Any) -> None:
            # each call's outputs are fingerprinted for the consistency check (worker/consistency.py)
            values = flatten_outputs(out)
            _require_plain(values)
            consistent.add(call, k, values)

        try:
            res = time_callable(
                self.model,
                sets,
                self.spec.timing,
                self.device,
                keep,
                Reservoir(self.spec.sample_count),
                functools.partial(disguise, sets) if len(sets) > 1 else None,
                plain,
            )
            # every timed output was a plain tensor (`plain`); writing them can still fail (runtime_error)
            for call, k, values in sorted(kept.values(), key=lambda entry: entry[0]):
                self.result.samples.append((call, k, save_tensors(self.jobdir, f"sample_{call}", values)))
        except Stop:
            raise
        except (Exception, SystemExit) as exc:
            raise _failure(exc, Status.RUNTIME_ERROR) from None
        self.result.inconsistent = consistent.check() or ""
        self.result.timing = res.stats
        self.result.times_ms = [round(t, 6) for t in res.times_ms]
        self.result.wall_ms = [round(w, 6) for w in res.wall_ms]
        self.result.overhead_ms = res.overhead_ms
        self.guard("timing")

    def phase(self, name: str, step: Callable[[], object]) -> None:
        t0 = time.perf_counter()
        try:
            step()
        finally:
            self.result.phases[name] = round(time.perf_counter() - t0, 3)

    def run(self) -> WorkerResult:
        from kbench.problems import load
        from kbench.sandbox import lease

        say = lambda phase: announce(self.jobdir, phase)  # noqa: E731  (the host's budget per phase)
        try:
            if self.spec.receive and self.spec.role != "build":
                # Before the lease: a worker holding it while it waits for the reference's outputs would
                # keep the reference from the GPU it needs to compute them.
                say("receive")
                self.phase("receive", self.receive)
            if lease.required(self.spec.role, self.spec.device):
                say("lease")
                name = lease.device_id(self.spec.device)
                wait = self.spec.lease_wait_s
                self.phase("lease", lambda: lease.acquire(name, self.jobdir, wait, self.spec.role))
            say("build" if self.spec.role == "build" else "load")
            self.phase("import", self.import_candidate)
            if self.spec.role == "build" or self.spec.problem is None:
                return self.result
            loaded = load(self.spec.problem, self.spec.preset)
            self.phase("construct", lambda: self.build_model(loaded))
            say("correctness")
            self.phase("correctness", lambda: self.correctness(loaded))
            self.phase("kernel_use", lambda: self.kernel_use(loaded))
            self.phase("compile_check", self.compile_check)
            if self.spec.measure and self.spec.timing_seeds:
                if self.spec.settle:
                    say("settle")
                    self.phase("settle", self.wait_settled)
                say("timing")
                self.phase("timing", lambda: self.measure(loaded))
        except Stop as stop:
            self.result.status, self.result.message, self.result.rule = stop.status, stop.message, stop.rule
        except lease.LeaseTimeout as exc:
            self.result.error = str(exc)
        return self.result


def main(argv: list[str]) -> int:
    procs.bind_to_parent()  # first: a worker must never outlive the kbench process that started it
    jobdir = Path(argv[1])
    key = read_key()
    spec = JobSpec.model_validate_json((jobdir / JOB_FILE).read_text())
    # Before torch starts its thread pools and before anything of the candidate runs: Landlock confines
    # the calling thread and what it starts from then on (sandbox/confine.py).
    confinement = confine.confine(confine.job_folders(spec, jobdir)) if spec.confine else confine.OFF
    if spec.role == "build":
        # Compilers (this worker's ninja/nvcc children inherit it) yield the cores to the GPU lanes'
        # workers, which hold the device while they run: a starved lane leaves the GPU idle.
        os.nice(BUILD_NICE)
    t0 = time.perf_counter()
    job = CandidateJob(spec, jobdir, key)
    setup = round(time.perf_counter() - t0, 3)  # imports, hooks, guard snapshots; beside them `cuda`
    result = job.run()
    result.phases = {"setup": setup, **result.phases}
    result.confinement = confinement
    write_result(jobdir, result, key)
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown: the candidate's atexit hooks and destructors run no further code.
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
