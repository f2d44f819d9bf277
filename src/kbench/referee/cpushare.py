"""A native CPU candidate's kernel share, sampled by its referee from outside (trusted): over its kernel-use
calls (`measure`), and over every timed batch of its timing loop (`watch`, `rule_on_share`; `sham`
samples the reference's timed batches alike). referee/perfshare.py samples, referee/timing.py runs the
batches."""

from __future__ import annotations

import math
import secrets
import time

from kbench.referee import Stop, perfshare
from kbench.referee.feed import Feed, memory_cap
from kbench.referee.job import Job
from kbench.sandbox.commands import OutputMeta, Ran, Run
from kbench.types import LoopFacts, Status

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
# The timing loop's calls are sampled too: every timed batch (referee/timing.py, a watch of `every`
# batch), so that no batch runs unsampled and a runner that feels the sampling's slowdown learns nothing
# by it; the reference's timed batches are sampled alike (`sham`), so both sides of a speedup pay the
# same slowdown. A sample every `TimingSettings.sample_period_ns` of a thread's run time (types.py
# CPU_SAMPLE_PERIOD_NS, 500 us): sparse, so the slowdown is a few percent (on a 2-core virtual machine,
# where a sample costs ~20 us, within run-to-run noise for calls of 6-300 us in 20 ms batches, against
# 1.2-3x at 50 us: benchmarks/results/cpu/sampling-overhead.md). A loop whose settings sample nothing is
# sampled every TIMED_PERIOD_NS in batches drawn among the timed ones, their times not kept. A candidate
# whose own code's share of the sampled calls is, at a confidence of 1 - 1e-3 (the upper end of its
# Wilson interval, Z), at most DROP of the share its kernel-use calls showed and at least DROP_POINTS
# under it, over TIMED_SAMPLES counted samples or more, ran other code in its timing loop than when its
# share was taken (`cheat no-custom-kernel`). An honest candidate's two shares differ by the sampling's
# error alone.
TIMED_PERIOD_NS = perfshare.PERIOD_NS
TIMED_SAMPLES = 30
# Samples a loop sampled in every batch takes, counting from its timed batches on (more batches after them
# while fewer, within the budget): sparse sampling of a short loop counts few, and a candidate that
# replaces some of its kernel's calls by PyTorch's is told from an honest one only over enough of them
TIMED_WANTED_EVERY = 200
DROP, DROP_POINTS, Z = 0.5, 0.15, 3.1


def sham(pids: list[int], period_ns: int) -> perfshare.Watch | None:
    """The sampling of a reference's timed batches, as dense as a candidate's and judging nothing: the
    slowdown it causes is then the same on both sides of a speedup. None where the events are refused."""
    try:
        return perfshare.Watch(pids, period_ns, lambda path: False, 0, 1.0, every=True, keep=False)
    except perfshare.Unavailable:
        return None


def wilson_upper(share: float, n: int, z: float) -> float:
    """The upper end of the Wilson score interval of a proportion `share` seen over `n` samples."""
    centre = share + z * z / (2 * n)
    spread = z * math.sqrt(share * (1 - share) / n + z * z / (4 * n * n))
    return min(1.0, (centre + spread) / (1 + z * z / n))


class CpuShare:
    """One job's sampling: `measure` first (its kernel-use calls), then `watch` for its timing loop and
    `rule_on_share` after it."""

    def __init__(self, job: Job, feed: Feed, layout: list[OutputMeta]) -> None:
        self.job, self.feed, self.layout = job, feed, layout
        self.counted = 0.5  # the fraction of the kernel-use samples that fell in its code or PyTorch's
        self.unsampled = False  # the kernel refused the performance events: no sampling at all

    def measure(self) -> float | None:
        """The share of the runner's CPU time in the candidate's own modules over a few of its calls, sampled
        by the kernel's performance events from this process; None (and a warning) where there are none.
        Rounds grow to about SHARE_ROUND_S of calls, and sampling stops as soon as enough samples are
        counted."""
        job, feed = self.job, self.feed
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

    def watch(self) -> perfshare.Watch | None:
        """The sampling of the timing loop's calls, where the kernel allows the events."""
        if self.unsampled:
            return None
        pids = [p for p in self.job.runner.descendants() if p not in self.job.builder.pids]
        builds = str(self.job.builds.resolve()) + "/"
        try:
            period = self.job.spec.timing.sample_period_ns
            return perfshare.Watch(
                pids,
                period or TIMED_PERIOD_NS,
                lambda path: path.startswith(builds),
                TIMED_WANTED_EVERY if period else TIMED_SAMPLES * 2,
                self.counted,
                every=period > 0,
            )
        except perfshare.Unavailable as exc:
            self.job.result.warnings.append(f"timed calls' kernel share not measured: {exc}")
            return None

    def rule_on_share(self, watch: perfshare.Watch) -> None:
        """`cheat no-custom-kernel` when the candidate's own code took a much smaller share of its timed
        calls than of the calls its kernel share was sampled on; the share is kept in the timing's
        `loop.timed_kernel_share`."""
        from dataclasses import replace

        job = self.job
        timed, counted = watch.share()
        stats = job.result.timing
        if stats is not None:
            share = None if timed is None else round(timed, 3)
            facts = replace(stats.loop or LoopFacts(), timed_kernel_share=share, timed_share_samples=counted)
            job.result.timing = replace(stats, loop=facts)
        if watch.unfollowed:
            job.result.warnings.append(
                f"{len(watch.unfollowed)} of the runner's threads were not sampled when timed (the events refused)"
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
