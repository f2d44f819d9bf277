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

import math
import secrets
import time
from typing import Any

from kbench.referee import Stop
from kbench.referee.calibrate import calibrate
from kbench.referee.checks import Checker, Flagged
from kbench.referee.feed import Feed, plain
from kbench.referee.job import Job, cpu_seconds
from kbench.referee.timing import memory_cap, time_runner
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
from kbench.types import Status

CORES_SLACK = 1.25  # a loop's CPU time may exceed its cores' share of the wall time by this factor
# A CPU candidate's kernel share: its calls are sampled until SHARE_SAMPLES samples fall in its code or
# PyTorch's (a standard error of the share of at most 5 points), for at most SHARE_MAX_S. The calls cycle
# over SHARE_SLOTS input slots of fresh seeds, in rounds of one command each (so the sampled time is
# mostly the calls'), each round about SHARE_ROUND_S of calls (at most SHARE_BATCH, and what memory
# allows): a round of 16 calls of a 30 us kernel was mostly its command's round trip.
SHARE_SAMPLES = 100
SHARE_SLOTS = 4
SHARE_ROUND_S = 0.02
SHARE_BATCH = 512
SHARE_MAX_S = 1.0
# The timing loop's calls are sampled too (batches drawn in among the timed ones, their times not kept:
# referee/timing.py), every TIMED_PERIOD_NS of a thread's run time: a candidate whose own code's share of
# them is, at a confidence of 1 - 1e-3 (the upper end of its Wilson interval, Z), at most DROP of the share
# its kernel-use calls showed and at least DROP_POINTS under it, over TIMED_SAMPLES counted samples or
# more, ran other code in its timing loop than when its share was taken (`cheat no-custom-kernel`): its
# kernel for the checked calls, PyTorch's for the loop. An honest candidate's two shares differ by the
# sampling's error alone.
TIMED_PERIOD_NS = 200_000
TIMED_SAMPLES = 30
DROP, DROP_POINTS, Z = 0.5, 0.15, 3.1


def wilson_upper(share: float, n: int, z: float) -> float:
    """The upper end of the Wilson score interval of a proportion `share` seen over `n` samples."""
    centre = share + z * z / (2 * n)
    spread = z * math.sqrt(share * (1 - share) / n + z * z / (4 * n * n))
    return min(1.0, (centre + spread) / (1 + z * z / n))


class CandidateJob:
    def __init__(self, job: Job) -> None:
        self.job = job
        self.spec = job.spec
        self.inbox: Any = None
        self.feed: Feed | None = None
        self.layout: list[Any] = []
        self.checker: Checker | None = None
        self.counted = 0.5  # the fraction of the kernel-use samples that fell in its code or PyTorch's
        self.unsampled = False  # the kernel refused the performance events: no sampling at all

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
        job.phase("load" if spec.role != "build" else "build")
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
                share = self._cpu_share()
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

    def ablation(self) -> None:
        """`cheat no-custom-kernel` when one call, made while everything the candidate's own kernels produce
        is made NaN (KernelRecorder.call), still matches the reference on its inputs: kernels that run
        beside PyTorch operators doing the work, their results unused. Fresh inputs, and the reference's
        model in this process (referee/checks.py), judge it."""
        from kbench.sandbox.commands import Copied, Copy, Ran, Run

        job, feed = self.job, self._feed()
        with job.timed("ablation"):
            checker = self._checker()
            filled = feed.fill(0, secrets.randbelow(2**62))
            feed.ready()
            metas = job.session.ask(Run.of([filled.call()], ablate=True), Ran).per_call()[0]
            plain(metas, "the ablation call")
            slot = feed.output_slots(metas, 1)[0]
            job.session.ask(Copy(outputs=[slot.ident]), Copied)
            try:
                checker.check(-1, filled.pristine, filled.literals, slot.tensors, count=False)
            except Flagged:
                return  # its kernels' results matter: without them the outputs are wrong
        raise Stop(
            Status.CHEAT,
            "with everything the candidate's own kernels produced made NaN, its outputs still matched the "
            "reference: they run, and PyTorch does the work",
            "no-custom-kernel",
        )

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

    def _cpu_share(self) -> float | None:
        """The share of the runner's CPU time in the candidate's own modules over a few of its calls, sampled
        by the kernel's performance events from this process; None (and a warning) where there are none.
        Rounds grow to about SHARE_ROUND_S of calls, and sampling stops as soon as enough samples are
        counted."""
        from kbench.referee import perfshare
        from kbench.sandbox.commands import Ran, Run

        job, feed = self.job, self._feed()
        pids = [p for p in job.runner.descendants() if p not in job.builder.pids]
        try:
            sampler = perfshare.Sampler(pids)
        except perfshare.Unavailable as exc:
            job.result.warnings.append(f"kernel share not measured: {exc}")
            self.unsampled = True
            return None
        builds = str(job.builds.resolve()) + "/"  # the job's copies of its builds: what the runner maps
        try:
            cap = max(1, min(SHARE_BATCH, memory_cap(feed, self.layout)))
            filled = [feed.fill(j, secrets.randbelow(2**62)) for j in range(min(SHARE_SLOTS, cap))]
            feed.ready()
            t0, size, wanted = time.monotonic(), len(filled), SHARE_SAMPLES
            while time.monotonic() - t0 < SHARE_MAX_S:
                calls = [filled[j % len(filled)].call() for j in range(size)]
                t1 = time.monotonic()
                with sampler:  # the runner's calls only: not its copies, nor the referee's inputs
                    job.session.ask(Run.of(calls), Ran)
                took = time.monotonic() - t1
                samples = sampler.instructions()
                if len(samples) >= wanted:
                    maps = {pid: perfshare.mappings(pid) for pid in {pid for pid, _ in samples}}
                    share, counted = perfshare.share(samples, maps, lambda path: path.startswith(builds))
                    if counted >= SHARE_SAMPLES:
                        self.counted = counted / len(samples)
                        return share
                    # most samples fall where neither side is counted (the interpreter, libc): take as many
                    # more as the counted fraction so far says are needed, before counting again
                    wanted = math.ceil(len(samples) * SHARE_SAMPLES / max(counted, 1) * 1.1)
                size = max(1, min(cap, round(size * SHARE_ROUND_S / max(took, 1e-4))))
        finally:
            sampler.close()
        job.result.warnings.append("kernel share not measured: too few samples of its calls (a loaded CPU)")
        return None

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
        pids = job.runner.descendants()
        cpu0 = cpu_seconds(pids)
        watch = self._watch()
        try:
            with job.timed("timing"):
                loop = time_runner(job.session, feed, self.layout, spec.timing, checker=checker, watch=watch)
            job.result.timing = loop.stats
            if loop.flagged is not None:
                job.result.flagged.append((loop.flagged.rule, loop.flagged.message))
                return
            self._cores(cpu_seconds(job.runner.descendants()) - cpu0, loop.stats)
            if watch is not None:
                self._timed_share(watch)
        finally:
            if watch is not None:
                watch.close()
        self.guard("timing")

    def _watch(self) -> Any:
        """The sampling of the timing loop's calls: a native CPU candidate's, where the kernel allows the events."""
        from kbench.referee import perfshare

        if not self._native_on_cpu() or self.unsampled:
            return None
        pids = [p for p in self.job.runner.descendants() if p not in self.job.builder.pids]
        builds = str(self.job.builds.resolve()) + "/"
        try:
            return perfshare.Watch(
                pids, TIMED_PERIOD_NS, lambda path: path.startswith(builds), TIMED_SAMPLES * 2, self.counted
            )
        except perfshare.Unavailable as exc:
            self.job.result.warnings.append(f"timed calls' kernel share not measured: {exc}")
            return None

    def _timed_share(self, watch: Any) -> None:
        """`cheat no-custom-kernel` when the candidate's own code took a much smaller share of its timed
        calls than of the calls its kernel share was sampled on; the share is kept in the timing's extras."""
        from dataclasses import replace

        job = self.job
        timed, counted = watch.share()
        stats = job.result.timing
        if stats is not None:
            extra = {
                **dict(stats.extra),
                "timed_kernel_share": (None if timed is None else round(timed, 3), counted),
            }
            job.result.timing = replace(stats, extra=tuple(sorted(extra.items())))
        if watch.unfollowed:
            job.result.warnings.append(
                f"{watch.unfollowed} of the runner's threads were not sampled when timed"
            )
        checked = job.result.kernel_share
        if checked is None or timed is None or counted < TIMED_SAMPLES:
            return
        most = wilson_upper(timed, counted, Z)
        if most <= checked * DROP and checked - most >= DROP_POINTS:
            raise Stop(
                Status.CHEAT,
                f"the candidate's own code took {timed:.1%} of its timing loop's sampled CPU time ({counted} "
                f"samples) against {checked:.1%} of the calls its kernel share was sampled on: other code did "
                "the timed work",
                "no-custom-kernel",
            )

    def _cores(self, cpu_s: float, stats: Any) -> None:
        """On the CPU: the runner's processes used at most their cores' share of the loop's wall time."""
        if self.spec.device.startswith("cuda") or not self.spec.cores:
            return
        active = float(dict(stats.extra).get("active_s", 0.0))
        allowed = len(self.spec.cores) * active * CORES_SLACK + 0.05
        if active > 0 and cpu_s > allowed:
            self.job.result.flagged.append((
                "cpu-cores",
                f"the candidate used {cpu_s:.2f} s of CPU time while its calls ran {active:.2f} s on "
                f"{len(self.spec.cores)} core(s): more cores than the reference was timed with, or work "
                "outside its calls",
            ))  # fmt: skip
