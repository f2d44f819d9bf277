"""A candidate's job, from the referee's side: load, correctness, kernel use, timing, the end (trusted).

Steps, each under its phase's budget (referee/session.py):
1. walls: the runner's namespaces, limits, cores and Landlock (referee/job.py `setup`);
2. receive (a GPU runner started beside the reference): the host's device buffers for the outputs;
3. role: the runner's imports, hooks and guard snapshots (its CUDA start beside them where no timing loop
   runs); then the GPU lease, held by the referee, never by the runner;
4. load: the candidate imported (its builds made by the referee) and `ModelNew` built;
5. correctness: one call per seed on inputs the referee made; outputs copied into its slots and handed to
   the host (files, or the host's device buffers); every input compared with its pristine copy;
6. kernel use: one profiled call; none of the candidate's kernels ran, or too small a share of the
   call's device time, is `cheat no-custom-kernel`;
7. timing: the referee's loop (referee/timing.py), calls drawn after each batch checked against the
   reference's model in this process (referee/checks.py); on the CPU, the runner's processes may not have
   used more CPU time than its cores give over the loop (`cheat cpu-cores`);
8. the end: anything the candidate left running is found (`cheat child-process`) and ended.
"""

from __future__ import annotations

import secrets
from typing import Any

from kbench.referee import Stop
from kbench.referee.calibrate import calibrate
from kbench.referee.checks import Checker, Flagged
from kbench.referee.cpushare import CpuShare
from kbench.referee.feed import Feed, plain
from kbench.referee.job import Job, cpu_seconds
from kbench.referee.timing import time_runner
from kbench.sandbox import slots as slotlib
from kbench.sandbox.commands import (
    Bind,
    Bound,
    Checked,
    CompileCheck,
    Guard,
    Guarded,
    Load,
    Loaded,
    Profile,
    Profiled,
    RunnerSpec,
)
from kbench.sandbox.tensorfiles import save_tensors
from kbench.types import Status, TimingStats

CORES_SLACK = 1.25  # a loop's CPU time may exceed its cores' share of the wall time by this factor


class CandidateJob:
    def __init__(self, job: Job) -> None:
        self.job = job
        self.spec = job.spec
        self.inbox: Any = None
        self.feed: Feed | None = None
        self.layout: list[Any] = []
        self.checker: Checker | None = None
        self.cpu: CpuShare | None = None  # a native CPU candidate's sampled share (referee/cpushare.py)

    def bind(self, made: list[slotlib.Slot]) -> None:
        fds = [fd for slot in made for fd in slot.fds()]
        self.job.session.ask(Bind(slots=[slot.ref() for slot in made]), Bound, fds)

    def guard(self, when: str) -> None:
        found = self.job.session.ask(Guard(when=when), Guarded)
        if found.rule:
            raise Stop(Status.CHEAT, found.message, found.rule)

    def run(self) -> None:
        import shutil

        job, spec = self.job, self.spec
        job.run.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(spec.candidate_file, job.run / "candidate.py")  # the one file of the job it reads
        job.setup(untrusted=True)
        if spec.receive and spec.role != "build":
            job.phase("receive")
            with job.timed("receive"):
                from kbench.sandbox.inbox import Inbox

                self.inbox = Inbox(job.jobdir, job.key)
        role = RunnerSpec(
            role=spec.role, problem=spec.problem, preset=spec.preset, dtype=spec.dtype, device=spec.device,
            backend=spec.backend, candidate_file=str(job.run / "candidate.py"), kernel_names=spec.kernel_names,
            init_seed=spec.init_seed, cache_dir=spec.cache_dir, compile_arch=spec.compile_arch,
            threads=spec.timing.threads,
        )  # fmt: skip
        job.phase("load")  # a build job's too: its compiles are counted out of it (referee/session.py)
        ready = job.start_role(role)
        job.result.phases.update({f"runner_{k}": v for k, v in ready.phases.items()})
        if spec.role != "build":
            job.take_lease()
            job.phase("load")
            if spec.measure:  # while the runner holds only kbench's code: the candidate cannot inflate it
                with job.timed("calibrate"):
                    job.session.calibration = calibrate(job.session, self._feed(), spec.timing.flush_l2)
        self.load()
        if spec.role == "build" or spec.problem is None:
            return
        self.correctness()
        self.kernel_use()
        self.ablation()
        self.backward_ablation()
        self.compile_check()
        if spec.measure:
            if spec.settle:
                from kbench.sandbox.offer import SETTLED_FILE, wait_for

                job.phase("settle")
                with job.timed("settle"):
                    wait_for(job.jobdir / SETTLED_FILE)
            self.timing()

    def load(self) -> None:
        job = self.job
        with job.timed("load"):
            try:
                loaded = job.session.ask(Load(), Loaded)
            except Stop as stop:
                if job.builder.timed_out:
                    raise Stop(
                        Status.TIMEOUT, "the build ran past its budget (build_timeout_s)", "build"
                    ) from None
                raise stop
        res = job.result
        res.build_seconds, res.build_cache_hit = loaded.build_seconds, loaded.build_cache_hit
        res.build_recipe, res.build_log = loaded.build_recipe, loaded.build_log
        res.phases.update({f"runner_{k}": v for k, v in loaded.phases.items()})
        if self.spec.role != "build":
            self.guard("import")

    def _feed(self) -> Feed:
        if self.feed is None:
            from kbench.problems import load

            assert self.spec.problem is not None
            loaded = load(self.spec.problem, self.spec.preset)
            self.feed = Feed(loaded.get_inputs, self.spec.device, self.spec.dtype, self.bind)
        return self.feed

    def correctness(self) -> None:
        from kbench.referee.checksums import checksum
        from kbench.sandbox.commands import Copied, Copy, Ran, Run

        job, feed = self.job, self._feed()
        job.phase("correctness")
        with job.timed("correctness"):
            for seed in self.spec.seeds:
                filled = feed.fill(0, seed)
                job.result.input_checksums[str(seed)] = checksum(filled.pristine)
                feed.ready()
                metas = job.session.ask(Run.of([filled.call()]), Ran).per_call()[0]
                plain(metas, f"the call on seed {seed}")
                if not self.layout:
                    self.layout = metas
                outs = feed.output_slots(metas, 1)
                job.session.ask(Copy(outputs=[outs[0].ident]), Copied)
                feed.check_unchanged(filled, "forward")
                job.result.outputs[str(seed)] = self.keep(str(seed), outs[0].tensors, metas)
                self.guard("forward")
            if self.inbox is not None:
                self.inbox.close()
                if self.inbox.failed:
                    job.result.warnings.append(f"outputs went through files: {self.inbox.failed}")

    def keep(self, seed: str, values: list[Any], metas: list[Any]) -> list[Any]:
        """Each output into the host's device buffer for it where there is one, else into a file; the
        device the candidate returned it on is what the entry says."""
        entries = []
        for i, (value, meta) in enumerate(zip(values, metas, strict=True)):
            entry = self.inbox.deliver(seed, i, value) if self.inbox is not None else None
            if entry is None:
                entry = save_tensors(self.job.jobdir, f"out_{seed}", [value], first=i)[0]
            entries.append(entry.model_copy(update={"device": meta.device}))
        return entries

    def kernel_use(self) -> None:
        job, feed = self.job, self._feed()
        filled = feed.fill(0, secrets.randbelow(2**62))  # inputs of its own: no memo of a correctness call
        feed.ready()
        with job.timed("kernel_use"):
            use = job.session.ask(Profile(call=filled.call()), Profiled)
            share = use.share
            if self._native_on_cpu():
                self.cpu = CpuShare(job, feed, self.layout)
                share = self.cpu.measure()
        job.result.kernels_ran, job.result.kernel_share = use.ran, share
        if not use.ran:
            seen = f"; device kernels that ran: {', '.join(use.library)}" if use.library else ""
            raise Stop(
                Status.CHEAT,
                f"none of the candidate's own kernels ran during forward{seen}",
                "no-custom-kernel",
            )
        floor = self.spec.min_kernel_share
        if share is not None and floor > 0 and share < floor:
            where = (
                "device time" if self.spec.device.startswith("cuda") else "CPU time (sampled by its referee)"
            )
            others = f": library code did the work ({', '.join(use.library[:5])})" if use.library else ""
            raise Stop(
                Status.CHEAT,
                f"the candidate's own kernels ({', '.join(use.ran)}) took {share:.1%} of the call's {where}, "
                f"under {floor:.0%}{others}",
                "no-custom-kernel",
            )

    def ablation(self, backward: bool = False) -> None:
        """`cheat no-custom-kernel` when one call, made while everything the candidate's own kernels produce
        is made NaN (KernelRecorder.call), still matches the reference on its inputs: kernels that run
        beside PyTorch operators doing the work, their results unused. Fresh inputs, and the reference's
        model in this process (referee/checks.py), judge it. `backward`: a training step's, its kernels'
        results made NaN during the backward alone."""
        from kbench.baselines.modes import ABLATED_BACKWARD
        from kbench.sandbox.commands import Copied, Copy, Ran, Run

        job, feed = self.job, self._feed()
        with job.timed("ablation_backward" if backward else "ablation"):
            checker = self._checker()
            filled = feed.fill(0, secrets.randbelow(2**62))
            feed.ready()
            ask = (
                Run.of([filled.call()], mode=ABLATED_BACKWARD)
                if backward
                else Run.of([filled.call()], ablate=True)
            )
            metas = job.session.ask(ask, Ran).per_call()[0]
            plain(metas, "the ablation call")
            slot = feed.output_slots(metas, 1)[0]
            job.session.ask(Copy(outputs=[slot.ident]), Copied)
            try:
                checker.check(-1, filled.pristine, filled.literals, slot.tensors, count=False)
            except Flagged:
                return  # its kernels' results matter: without them the outputs are wrong
        if backward:
            raise Stop(
                Status.CHEAT,
                "with everything the candidate's own kernels produced during the backward made NaN, its "
                "gradients still matched the reference's: the backward is PyTorch's, not its kernels'",
                "no-custom-kernel",
            )
        raise Stop(
            Status.CHEAT,
            "with everything the candidate's own kernels produced made NaN, its outputs still matched the "
            "reference: they run, and PyTorch does the work",
            "no-custom-kernel",
        )

    def backward_ablation(self) -> None:
        """A training step's ablation of its backward alone (`ablation(backward=True)`)."""
        from kbench.problems.format import parse_problem

        assert self.spec.problem is not None
        if parse_problem(self.spec.problem.code, self.spec.problem.key).training is not None:
            self.ablation(backward=True)

    def _checker(self) -> Checker:
        if self.checker is None:
            spec = self.spec
            assert spec.problem is not None
            self.checker = Checker(spec.problem, spec.preset, spec.dtype, spec.device, spec.init_seed)
            self.checker.prepare()
        return self.checker

    def _native_on_cpu(self) -> bool:
        """A CPU candidate whose kernels are native code from the build cache (cpp): its share is sampled
        from outside (referee/perfshare.py); an interpreted Triton kernel has no code of its own to find."""
        from kbench.backends import get_backend

        return not self.spec.device.startswith("cuda") and get_backend(self.spec.backend).prebuilds

    def compile_check(self) -> None:
        job = self.job
        with job.timed("compile_check"):
            check = job.session.ask(CompileCheck(), Checked)
        if check.log:
            job.result.build_log = (job.result.build_log + "\n" + check.log).strip()
        if not check.ok:
            raise Stop(
                Status.BUILD_ERROR,
                f"Triton kernel does not compile for {self.spec.compile_arch}:\n{check.log}"[-4000:],
            )

    def timing(self) -> None:
        job, feed, spec = self.job, self._feed(), self.spec
        job.phase("timing")
        checker = self._checker()
        watch = self.cpu.watch() if self.cpu is not None else None
        try:
            with job.timed("timing"):
                loop = time_runner(job.session, feed, self.layout, spec.timing, checker=checker, watch=watch,
                                   meter=lambda: cpu_seconds(job.runner.descendants()))  # fmt: skip
            job.result.timing = loop.stats
            if loop.flagged is not None:
                job.result.flagged.append((loop.flagged.rule, loop.flagged.message))
                return
            self._cores(loop.stats)
            if watch is not None and self.cpu is not None:
                self.cpu.rule_on_share(watch)
        finally:
            if watch is not None:
                watch.close()
        self.guard("timing")
        self.forward_timing()

    def forward_timing(self) -> None:
        """A training step's forward alone, timed as the reference's is (baselines.modes.FORWARD), its
        calls checked as the step's are; the backward's time is the step's less this one."""
        from kbench.baselines.modes import forward_of
        from kbench.problems import load

        spec = self.spec
        assert spec.problem is not None
        problem = load(spec.problem, spec.preset)
        if problem.training is None:
            return
        checker = Checker(spec.problem, spec.preset, spec.dtype, spec.device, spec.init_seed, forward=True)
        checker.prepare()
        forward = self.layout[: len(self.layout) - problem.gradient_count()]
        with self.job.timed("timing_forward"):
            loop = time_runner(
                self.job.session,
                self._feed(),
                forward,
                spec.timing,
                mode=forward_of("candidate"),
                checker=checker,
            )
        if loop.flagged is not None:
            self.job.result.flagged.append((loop.flagged.rule, loop.flagged.message))
            return
        self.job.result.timings[forward_of("candidate")] = loop.stats

    def _cores(self, stats: TimingStats) -> None:
        """On the CPU: the runner's processes used at most their cores' share of the loop's windows, from its
        first timed batch on (its slots bound before: LoopFacts.runner_cpu_s)."""
        facts = stats.loop
        if self.spec.device.startswith("cuda") or not self.spec.cores or facts is None:
            return
        cpu_s, active = facts.runner_cpu_s or 0.0, facts.active_s
        allowed = len(self.spec.cores) * active * CORES_SLACK + 0.05
        if active > 0 and cpu_s > allowed:
            self.job.result.flagged.append((
                "cpu-cores",
                f"the candidate used {cpu_s:.2f} s of CPU time while its calls ran {active:.2f} s on "
                f"{len(self.spec.cores)} core(s): more cores than the reference was timed with, or work "
                "outside its calls",
            ))  # fmt: skip
