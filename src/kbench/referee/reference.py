"""The reference's job, from the referee's side: outputs per seed, the checked calls' outputs, baselines.

The runner (worker/reference.py) serves the problem's `Model`; its referee commands it exactly as a
candidate's referee commands the candidate (the same inputs per seed, the same loop, referee/timing.py),
so every baseline is measured the way the candidate is. Steps:
1. the runner starts (its CUDA context before the lease where no timing loop runs) and builds the model
   on the CPU; then the referee takes the GPU lease;
2. outputs for every seed of the job, kept on the GPU while they fit in a quarter of its free memory;
3. the baselines (eager, torch.compile modes) unless the host reuses stored ones;
4. the outputs' layouts signed for the host (it sizes a candidate's device buffers from them), the
   outputs copied into the host's device buffers where offered, the lease given up, then the rest written
   to files (the fixed seeds' into the reference cache's folder on a miss).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from kbench.baselines.modes import forward_of
from kbench.referee.calibrate import calibrate
from kbench.referee.checksums import checksum
from kbench.referee.cpushare import sham
from kbench.referee.feed import Feed
from kbench.referee.job import Job
from kbench.referee.timing import time_runner
from kbench.sandbox import slots as slotlib
from kbench.sandbox.commands import Bind, Bound, Copied, Copy, Load, Loaded, Place, Ran, Run, RunnerSpec
from kbench.sandbox.offer import write_layouts
from kbench.sandbox.protocol import TensorFile
from kbench.sandbox.tensorfiles import save_tensors


class Keeper:
    """Where each output waits to be written: on its GPU while all of them take at most a quarter of the
    memory free there, else copied to the CPU now."""

    def __init__(self, device: str) -> None:
        import torch

        self.budget = torch.cuda.mem_get_info(device)[0] // 4 if device.startswith("cuda") else 0

    def __call__(self, value: Any) -> Any:
        nbytes = value.numel() * value.element_size()
        if value.device.type == "cuda" and nbytes <= self.budget:
            self.budget -= nbytes
            return value.detach().clone()
        return value.detach().to("cpu", copy=True)


class ReferenceJob:
    def __init__(self, job: Job) -> None:
        self.job, self.spec = job, job.spec
        self.feed: Feed | None = None
        self.devices: dict[str, list[str]] = {}  # per seed, the device each output was returned on

    def bind(self, made: list[slotlib.Slot]) -> None:
        fds = [fd for slot in made for fd in slot.fds()]
        self.job.session.ask(Bind(slots=[slot.ref() for slot in made]), Bound, fds)

    def call(self, seed: int) -> tuple[list[Any], list[Any]]:
        """One call on the inputs of `seed`: the outputs' slot tensors and metas."""
        assert self.feed is not None
        filled = self.feed.fill(0, seed)
        self.feed.ready()
        metas = self.job.session.ask(Run.of([filled.call()]), Ran).per_call()[0]
        outs = self.feed.output_slots(metas, 1)
        self.job.session.ask(Copy(outputs=[outs[0].ident]), Copied)
        self.job.result.input_checksums[str(seed)] = checksum(filled.pristine)
        return outs[0].tensors, metas

    def run(self) -> None:
        from kbench.problems import load

        job, spec = self.job, self.spec
        assert spec.problem is not None
        job.setup(untrusted=False)
        job.phase("load")
        ready = job.start_role(RunnerSpec(
            role="reference", problem=spec.problem, preset=spec.preset, dtype=spec.dtype, device=spec.device,
            init_seed=spec.init_seed, cache_dir=spec.cache_dir, threads=spec.timing.threads,
            baselines=spec.baselines if spec.measure else [],
        ))  # fmt: skip
        job.result.phases.update({f"runner_{k}": v for k, v in ready.phases.items()})
        with job.timed("construct"):
            loaded = job.session.ask(Load(), Loaded)
        job.result.phases.update({f"runner_{k}": v for k, v in loaded.phases.items()})
        job.take_lease()
        job.phase("reference")
        with job.timed("device"):  # on a GPU, the runner's CUDA start unless it came before the lease
            job.session.ask(Place(), Loaded)
        problem = load(spec.problem, spec.preset)
        self.feed = Feed(problem.get_inputs, spec.device, spec.dtype, self.bind)
        keep = Keeper(spec.device)
        outputs: dict[str, list[Any]] = {}
        layout: list[Any] = []
        t0 = time.perf_counter()
        for seed in spec.seeds:
            values, layout = self.call(seed)
            outputs[str(seed)] = [keep(v) for v in values]
            self.devices[str(seed)] = [m.device for m in layout]
        job.result.phases["outputs"] = round(time.perf_counter() - t0, 3)
        if spec.measure:
            with job.timed("calibrate"):
                job.session.calibration = calibrate(job.session, self.feed, spec.timing.flush_l2)
            forward = layout[: len(layout) - problem.gradient_count()]  # a training step's first outputs
            for mode in spec.baselines:
                t0 = time.perf_counter()
                period = spec.timing.sample_period_ns
                watch = sham(job.runner.descendants(), period) if period else None
                try:
                    job.result.timings[mode] = time_runner(
                        job.session, self.feed, layout, spec.timing, mode=mode, watch=watch
                    ).stats
                finally:
                    if watch is not None:
                        watch.close()
                if problem.training is not None:  # its forward alone, as the candidate's is timed
                    job.result.timings[forward_of(mode)] = time_runner(
                        job.session, self.feed, forward, spec.timing, mode=forward_of(mode)
                    ).stats
                job.result.phases[f"time_{mode}"] = round(time.perf_counter() - t0, 3)
        write_layouts(job.jobdir, outputs, job.key)
        delivered = self.deliver(outputs) if spec.receive else {}
        if job.leased:
            if spec.device.startswith("cuda"):
                import torch

                torch.cuda.synchronize(spec.device)
            job.give_lease()
        self.write(outputs, delivered)

    def deliver(self, outputs: dict[str, list[Any]]) -> dict[tuple[str, int], TensorFile]:
        """Copy each output the host offered a buffer for into it; the entries of those delivered."""
        from kbench.sandbox.inbox import Inbox

        t0 = time.perf_counter()
        # the host offers within milliseconds of the layouts; past the wait, its outputs go to files
        inbox = Inbox(self.job.jobdir, self.job.key, wait_s=self.spec.offer_wait_s)
        try:
            found = {}
            for tag, values in outputs.items():
                for i, value in enumerate(values):
                    entry = inbox.deliver(tag, i, value)
                    if entry is not None:
                        found[(tag, i)] = entry
            return found
        finally:
            inbox.close()
            self.job.result.phases["deliver"] = round(time.perf_counter() - t0, 3)

    def write(self, outputs: dict[str, list[Any]], delivered: dict[tuple[str, int], TensorFile]) -> None:
        """The outputs not delivered to the host's buffers into files; the cache's seeds into the cache's
        folder whatever happened to them."""
        job, spec = self.job, self.spec
        t0 = time.perf_counter()
        for_cache = {str(seed) for seed in spec.cache_seeds} if spec.cache_folder else set()
        for tag, values in outputs.items():
            entries: list[TensorFile | None] = [delivered.get((tag, i)) for i in range(len(values))]
            folder = Path(spec.cache_folder) if tag in for_cache else job.jobdir
            todo = [i for i, e in enumerate(entries) if e is None or tag in for_cache]
            files = dict(
                zip(todo, save_tensors(folder, f"out_{tag}", [values[i] for i in todo]), strict=True)
            )
            for i in todo:
                entries[i] = files[i].model_copy(update={"received": entries[i] is not None})
            job.result.outputs[tag] = [
                e.model_copy(update={"device": d})
                for e, d in zip(entries, self.devices[tag], strict=True)
                if e is not None
            ]
        job.result.phases["write"] = round(time.perf_counter() - t0, 3)
