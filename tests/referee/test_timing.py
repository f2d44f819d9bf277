"""The referee's timing loop (referee/timing.py) on the CPU, with the model in this process (LocalLink):
batches on the referee's clock, fresh inputs per call, the copy's charge, mutation, checked calls."""

from __future__ import annotations

import dataclasses
import itertools
import time
from typing import Any

import pytest
import torch

from kbench.referee import Stop, checks
from kbench.referee.calibrate import calibrate
from kbench.referee.feed import Feed
from kbench.referee.local import LocalLink
from kbench.referee.sizing import BatchCost, batch_size, fit_batch, loop_length, own_call, probe_size, warmed
from kbench.referee.stats import summarize_times
from kbench.referee.timing import SINGLE_CALLS, time_runner
from kbench.sandbox.commands import OutputMeta
from kbench.types import TimingSettings

FAST = TimingSettings(
    budget_s=2.0, warmup_s=0.01, min_warmup=3, min_runs=5, min_time_s=0.01, target_batch_s=0.005
)


def _inputs() -> list[Any]:
    return [torch.randn(64, 32)]


def _feed(get_inputs: Any = _inputs) -> Feed:
    return Feed(get_inputs, "cpu", "fp32", lambda slots: None)


def _layout() -> list[OutputMeta]:
    return [OutputMeta(dtype="float32", shape=[64, 32], device="cpu")]


class Sleepy(torch.nn.Module):
    """Sleeps `ms` per call and doubles its input."""

    def __init__(self, ms: float) -> None:
        super().__init__()
        self.ms, self.calls, self.seen = ms, 0, []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        self.seen.append(float(x[0, 0]))
        time.sleep(self.ms / 1e3)
        return x * 2


def test_summarize_statistics() -> None:
    s = summarize_times([1.0, 2.0, 3.0, 4.0, 100.0], "cpu", "referee-batches")
    assert s.median_ms == 3.0 and s.min_ms == 1.0 and s.n == 5
    assert s.mean_ms == pytest.approx(22.0)
    assert s.rse == pytest.approx(s.std_ms / 5**0.5 / s.mean_ms)


def test_a_call_is_timed_by_the_referees_clock_in_batches() -> None:
    model, feed = Sleepy(1.0), _feed()
    loop = time_runner(LocalLink(model, feed), feed, _layout(), FAST)
    facts = loop.stats.loop
    assert loop.stats.method == "referee-batches" and loop.stats.meaningful
    assert 1.0 <= loop.stats.median_ms <= 10.0  # a 1 ms sleep, its share of the round trip (and any load)
    assert facts is not None and loop.stats.clock is None  # no GPU clock to log on the CPU
    assert 1 <= facts.batch <= 5  # ~5 ms of calls per batch
    assert facts.calls == loop.stats.n * facts.batch and loop.stats.n >= FAST.min_runs
    assert facts.stop == "done" and facts.warmup_end == "full" and facts.warmup_calls >= 1
    assert facts.wall_s > 0 and facts.active_s > 0 and not facts.timing_lock_busy


def test_every_call_gets_inputs_of_its_own() -> None:
    """No memo can hit: the loop's calls never see the same input values twice."""
    model, feed = Sleepy(0.0), _feed()
    # 25 batches at least: more than 20 calls even where a loaded machine makes each batch one call
    time_runner(LocalLink(model, feed), feed, _layout(), dataclasses.replace(FAST, min_runs=25))
    assert len(model.seen) > 20 and len(set(model.seen)) == len(model.seen)


def test_batch_size_and_loop_length() -> None:
    settings = TimingSettings(target_batch_s=0.005, max_batch=2000, min_runs=20, min_time_s=0.2, budget_s=5.0)
    assert batch_size(0.001, settings, cap=10_000) == 5
    assert batch_size(1e-7, settings, cap=10_000) == 2000  # at most max_batch
    assert batch_size(1e-7, settings, cap=7) == 7  # at most what memory holds
    assert batch_size(0.5, settings, cap=10_000) == 1
    assert loop_length(0.001, 5, settings, checked=50) == 200  # 0.2 s of calls
    assert loop_length(0.5, 1, settings, checked=50) == 50  # the checked calls at least, past the budget
    assert loop_length(1e-6, 2000, settings, checked=50) == 200_000  # 0.2 s of calls
    assert loop_length(1e-4, 100, settings, checked=50) == 2_000  # min_runs batches
    assert loop_length(0.001, 7, settings, checked=50) % 7 == 0


def test_work_done_while_copying_is_charged_to_the_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    """A runner that answers its calls at once and does their work while it copies their outputs gains
    nothing: the copy's window is charged beyond its round trip and what the same copy takes the referee.
    On a clock only the calls' work moves, so the two loops' times compare exactly, whatever the load."""
    from kbench.referee import timing

    clock = _Clock()
    monkeypatch.setattr(timing, "_ns", clock)

    class Deferred(LocalLink):
        def copy(self, outputs: list[int]) -> None:
            clock.now += 2_000_000 * len(outputs)  # the calls' real work, done now
            super().copy(outputs)

    feed = _feed()
    honest = time_runner(LocalLink(Ticking(2.0, clock), feed), feed, _layout(), FAST)
    feed2 = _feed()
    cheat = time_runner(Deferred(Ticking(0.0, clock), feed2), feed2, _layout(), FAST)
    assert honest.stats.median_ms == pytest.approx(2.0)
    assert cheat.stats.median_ms >= 0.99 * honest.stats.median_ms


def test_the_calibrated_round_trip_is_deducted_from_each_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    """A link whose every batch costs a fixed round trip on top of its calls: with that round trip
    calibrated, a call's time is its own work, whatever the batch size; uncalibrated, the round trip
    inflates it by its share of the batch. On a clock only the calls and the round trip move, so the
    numbers are exact whatever the machine's load."""
    from kbench.referee import calibrate as calibrating
    from kbench.referee import timing

    clock = _Clock()
    monkeypatch.setattr(timing, "_ns", clock)
    monkeypatch.setattr(calibrating, "_ns", clock)

    class Slow(LocalLink):
        def run(
            self, calls: list[Any], mode: str, outputs: list[int], repeat: int = 0
        ) -> list[list[OutputMeta]]:
            clock.now += 6_000_000  # the command's round trip
            return super().run(calls, mode, outputs, repeat)

    settings = dataclasses.replace(FAST, target_batch_s=0.008)
    feed = _feed()
    plain = time_runner(Slow(Ticking(2.0, clock), feed), feed, _layout(), settings).stats
    calibrated = Slow(Ticking(2.0, clock), _feed())
    calibrated.calibration = calibrate(calibrated, calibrated.feed)  # type: ignore[attr-defined]
    deducted = time_runner(calibrated, calibrated.feed, _layout(), settings).stats
    assert deducted.loop is not None and plain.loop is not None
    assert deducted.loop.overhead_ms == pytest.approx(6.0)  # the round trip, calibrated
    batch = plain.loop.batch
    assert plain.median_ms == pytest.approx(2.0 + 6.0 / batch)  # the round trip's share of each call
    assert deducted.median_ms == pytest.approx(2.0)  # the call's own work, and nothing else


def test_batch_cost_own_call_and_probe_size_arithmetic() -> None:
    settings = TimingSettings(target_batch_s=0.01, max_batch=2000, min_runs=20, budget_s=5.0)
    cost = BatchCost.between(one_s=0.025, batch=8, batch_s=0.032, call_s=0.0003)
    assert cost.per_call_s == pytest.approx(0.001) and cost.fixed_s == pytest.approx(0.024)
    assert cost.wall(100) == pytest.approx(0.124)
    assert BatchCost.between(0.025, 8, 0.020, 0.0003).per_call_s == 0.0003  # noise: at least the call
    assert BatchCost.between(0.025, 1, 0.020, 0.0003) == BatchCost(0.0, 0.025)
    # 20 batches in 80 % of 5 s: 0.2 s a batch, less its fixed cost, at 1 ms a call
    assert fit_batch(2000, cost, settings) == 176
    assert fit_batch(2000, BatchCost(0.0, 0.025), settings) == 8  # the one-call wall alone: 8
    assert fit_batch(2000, BatchCost(0.5, 0.001), settings) == 1  # no room: one call
    # a one-call batch charged 3.1 ms, a batch of 3 1.1 ms a call: 0.1 ms a call and 3 ms a batch
    assert own_call(0.0031, 3, 0.0011) == pytest.approx(0.0001)
    assert own_call(0.0031, 3, 0.0001) == pytest.approx(0.000005)  # a tilted line: a twentieth of the batch's
    assert probe_size(0.0001, settings, cap=10_000) == 100
    assert probe_size(0.015, settings, cap=10_000) == 2  # maybe shorter than the target: two calls
    assert probe_size(0.015, settings, cap=1) == 1  # unless memory holds one
    assert probe_size(0.05, settings, cap=10_000) == 1  # a call past twice the target is long


def test_a_batchs_fixed_cost_does_not_shrink_the_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """A runner whose every batch costs 3 ms past its calls, uncalibrated (a round trip's jitter, say), and
    whose calls take 0.1 ms: the warm-up's one-call batches charge 3.1 ms a call, which alone would size the
    batches at 3 calls; the probes find the call's own time and size them at the target's 100."""
    from kbench.referee import timing

    clock = _Clock()
    monkeypatch.setattr(timing, "_ns", clock)

    class Slow(LocalLink):
        def run(
            self, calls: list[Any], mode: str, outputs: list[int], repeat: int = 0
        ) -> list[list[OutputMeta]]:
            clock.now += 3_000_000
            return super().run(calls, mode, outputs, repeat)

    settings = dataclasses.replace(FAST, target_batch_s=0.01)
    feed = _feed()
    stats = time_runner(Slow(Ticking(0.1, clock), feed), feed, _layout(), settings).stats
    assert stats.loop is not None and stats.loop.batch == 100
    assert stats.median_ms == pytest.approx(0.1 + 3.0 / 100)


def test_slots_are_bound_before_the_timed_batches_and_the_runners_cpu_metered_from_them() -> None:
    """The runner's work of binding slots falls before the meter's first reading: the CPU rule
    (referee/candidate.py) sets the runner's CPU time against its windows from there on."""
    events: list[str] = []
    feed = Feed(_inputs, "cpu", "fp32", lambda slots: events.append("bind"))
    readings = iter(range(100))

    def meter() -> float:
        events.append("meter")
        return float(next(readings)) * 0.5

    loop = time_runner(LocalLink(Sleepy(0.0), feed), feed, _layout(), FAST, meter=meter)
    assert events.count("meter") == 2 and events[-1] == "meter"
    assert "bind" not in events[events.index("meter") :]  # no slot bound once the meter ran
    assert loop.stats.loop is not None and loop.stats.loop.runner_cpu_s == 0.5


def test_a_timed_call_that_writes_its_inputs_is_caught() -> None:
    class Writer(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.calls = 0

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.calls += 1
            if self.calls > 12:  # past the warm-up: the result written into the input, returned
                return x.mul_(2)
            return x * 2

    feed = _feed()
    with pytest.raises(Stop) as caught:
        time_runner(LocalLink(Writer(), feed), feed, _layout(), FAST)
    assert caught.value.rule == "inputs-mutated" and "timed call" in caught.value.message


def test_a_timed_call_of_another_shape_is_caught() -> None:
    class Shifty(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x[:1] * 2

    feed = _feed()
    with pytest.raises(Stop) as caught:
        time_runner(LocalLink(Shifty(), feed), feed, _layout(), FAST)
    assert caught.value.rule == "timing-output-mismatch"


class _Problem:
    """What checks.Checker needs of a problem, with the doubling model as the reference."""

    def tol(self, dtype: str) -> float:
        return 1e-4


class _Checker(checks.Checker):
    def __init__(self) -> None:
        super().__init__(_Problem(), "small", "fp32", "cpu", 42)
        self.model = lambda x: x * 2


def test_checked_calls_are_drawn_after_each_batch_and_a_wrong_one_flags_the_loop() -> None:
    class Lazy(torch.nn.Module):
        """Right on every call but one in four, where it returns its input (cheap, wrong). A loop
        misses a share w of wrong calls with chance exp(-w * CHECKED) at most (checks.py): for
        w = 1/4, 4e-6 a loop, so five loops in a row catch it on every run of the suite (at w = 1/10
        a loop misses up to 0.7 % of the time, and five of them 3 %; checks.miss_probability's test
        covers the small shares)."""

        def __init__(self) -> None:
            super().__init__()
            self.calls = itertools.count()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.clone() if next(self.calls) % 4 == 3 else x * 2

    caught = 0
    for _ in range(5):
        feed = _feed()
        loop = time_runner(LocalLink(Lazy(), feed), feed, _layout(), FAST, checker=_Checker())
        caught += loop.flagged is not None and loop.flagged.rule == "timing-output-mismatch"
    assert caught == 5

    feed, checker = _feed(), _Checker()
    honest = time_runner(LocalLink(Sleepy(0.0), feed), feed, _layout(), FAST, checker=checker)
    assert honest.flagged is None and checker.checked >= checks.CHECKED
    assert honest.stats.loop is not None and honest.stats.loop.checked == checker.checked


def test_a_short_loop_checks_extra_calls_the_runner_cannot_tell_apart() -> None:
    settings = TimingSettings(budget_s=0.05, warmup_s=0.01, min_warmup=3, min_runs=2, min_time_s=0.01)
    feed, checker = _feed(), _Checker()
    loop = time_runner(LocalLink(Sleepy(2.0), feed), feed, _layout(), settings, checker=checker)
    facts = loop.stats.loop
    assert facts is not None and facts.stop == "budget" and facts.extra_checked_calls > 0
    assert checker.checked >= checks.CHECKED


def test_the_miss_probability_is_under_one_percent_at_ten_percent_whatever_the_loop() -> None:
    for calls in (1, 10, 50, 51, 200, 2000, 100_000):
        n = max(calls, checks.CHECKED)  # a loop has at least CHECKED checked calls (extra ones if short)
        assert checks.miss_probability(0.1, n) < 0.01, calls
    assert checks.miss_probability(0.02, 10_000) < 1e-8  # a long loop catches rarer cheats too
    assert checks.share(10) == 1.0 and checks.share(100_000) == checks.MIN_SHARE


def test_draws_follow_their_probability() -> None:
    drawn = sum(len(checks.drawn(1000, 0.1)) for _ in range(20))
    assert 1600 < drawn < 2400
    assert checks.drawn(100, 1.0) == list(range(100)) and checks.drawn(100, 0.0) == []


def test_warmup_ends_early_on_a_settled_clock_and_level_calls() -> None:
    settings = TimingSettings(warmup_s=0.5, settled_warmup_s=0.03, min_warmup=5)
    level = [1.0] * 10
    assert warmed(level, 0.05, settings, lambda now: True)
    assert not warmed(level, 0.01, settings, lambda now: True)  # too early
    assert not warmed(level, 0.05, settings, lambda now: False)  # the clock not settled
    assert not warmed(level, 0.05, settings, None)  # no NVML: never early
    assert not warmed([2.0] * 5 + [1.0] * 5, 0.05, settings, lambda now: True)  # still speeding up
    off = TimingSettings(warmup_s=0.15, settled_warmup_s=0.0, min_warmup=5)
    assert not warmed(level, 0.05, off, lambda now: True)


class _FakeNvml:
    """NVML as `ClockSettled` sees it: a maximum SM clock and readings taken from a script."""

    handle = object()

    def __init__(self, top: float | None, readings: list[float]) -> None:
        self.top, self.readings = top, readings

    def max_sm_clock(self) -> float | None:
        return self.top

    def read(self) -> tuple[float, float, int] | None:
        clock = self.readings.pop(0) if len(self.readings) > 1 else self.readings[0]
        return clock, 40.0, 0


def test_clock_settled_needs_a_high_reading_held_over_its_window() -> None:
    from kbench.referee.gpu_clock import ClockSettled

    gate = ClockSettled(_FakeNvml(1980.0, [345.0, 1980.0, 1975.0, 1200.0, 1980.0]), hold_s=0.02)  # type: ignore[arg-type]
    assert not gate(0.00)  # idle clock
    assert not gate(0.01)  # high now, not yet held
    assert not gate(0.02)  # held 10 ms
    assert not gate(0.03)  # dropped: starts over
    assert not gate(0.04)
    assert gate(0.061)  # high since 0.04
    assert gate(0.0615)  # between readings the answer stands


def test_clock_settled_never_passes_without_a_known_maximum_or_below_it() -> None:
    from kbench.referee.gpu_clock import ClockSettled

    unknown = ClockSettled(_FakeNvml(None, [1980.0]))  # type: ignore[arg-type]
    capped = ClockSettled(_FakeNvml(1980.0, [1750.0]))  # type: ignore[arg-type]  # power-capped or locked
    assert not any(unknown(t / 100) for t in range(20))
    assert not any(capped(t / 100) for t in range(20))


@pytest.mark.gpu
def test_gpu_batches_time_like_the_profiler() -> None:
    """On a GPU, a batch of back-to-back calls timed by the referee's clock gives each call's device time
    within a few percent of CUDA events around the same calls (the round trip is a batch's small share).
    Each call on inputs of its own, as the referee's are."""
    device = "cuda"
    xs = [torch.randn(16 << 20, device=device) for _ in range(8)]

    def get_inputs() -> list[Any]:
        return [torch.randn(16 << 20)]

    model = torch.nn.ReLU()
    feed = Feed(get_inputs, device, "fp32", lambda slots: None)
    layout = [OutputMeta(dtype="float32", shape=[16 << 20], device="cuda:0")]
    loop = time_runner(LocalLink(model, feed), feed, layout, TimingSettings())
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for i in range(10):
        model(xs[i % len(xs)])
    start.record()
    for i in range(100):
        model(xs[i % len(xs)])
    end.record()
    end.synchronize()
    events_ms = start.elapsed_time(end) / 100
    assert abs(loop.stats.median_ms - events_ms) <= 0.05 * events_ms, (
        loop.stats.median_ms,
        events_ms,
        loop.stats.loop,
        loop.stats.clock,
    )


def test_outputs_made_in_the_referees_slots_save_none_of_the_calls_time() -> None:
    """A runner maps the referee's output slots and the loop reuses them in order, so it can make a call's
    output right in the slot it will be copied to and skip the copy. The copy has a window of its own,
    charged less what a copy takes the referee and floored at nothing: the skipped copy takes nothing off
    the calls' time, which stays what their work takes."""
    numel = 1 << 20  # 4 MiB a call: a copy costs about what the call's work does

    def big() -> list[Any]:
        return [torch.randn(numel)]

    layout = [OutputMeta(dtype="float32", shape=[numel], device="cpu")]

    class InTheSlots(LocalLink):
        def run(
            self, calls: list[Any], mode: str, outputs: list[int], repeat: int = 0
        ) -> list[list[OutputMeta]]:
            pool = [s for p in self.feed.outputs.values() for s in p]
            if not calls or len(pool) < len(calls):
                return super().run(calls, mode, outputs, repeat)
            self.kept = []
            for call, slot in zip(calls, pool, strict=False):  # the slots the loop will copy these to
                x = self._slot(call.inputs).tensors[0]
                self.kept.append([torch.mul(x, 2.0, out=slot.tensors[0])])
            return [layout] * len(calls)  # their copies are then copies of a tensor onto itself

    settings = dataclasses.replace(FAST, min_runs=8, target_batch_s=0.02)
    feed = Feed(big, "cpu", "fp32", lambda slots: None)
    cheat = time_runner(InTheSlots(lambda x: x * 2.0, feed), feed, layout, settings).stats
    x, out = torch.randn(numel), torch.empty(numel)
    work = []  # the call's own work, as the cheat does it (into memory it already has)
    for _ in range(20):
        t0 = time.perf_counter()
        torch.mul(x, 2.0, out=out)
        work.append((time.perf_counter() - t0) * 1e3)
    assert cheat.median_ms >= 0.7 * min(work), (cheat.median_ms, min(work))


class _Clock:
    """The loop's clock, moved only by the model: a call of `ms` takes exactly `ms` on it, whatever the
    machine's load, so the times the loop keeps can be told from a watched batch's to the digit."""

    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


class Ticking(Sleepy):
    """Sleepy on the loop's clock instead of the machine's."""

    def __init__(self, ms: float, clock: _Clock) -> None:
        super().__init__(ms)
        self.clock = clock

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        self.clock.now += int(self.ms * 1e6)
        return x * 2


class _Watch:
    """A watch that makes the model twenty times slower while entered, logs its batches into `order` and has
    `enough` after `wanted` of them."""

    def __init__(self, model: Sleepy, wanted: int, order: list[str], every: bool = False) -> None:
        self.model, self.wanted, self.entered, self.order = model, wanted, 0, order
        self.wanted_s = 0.0
        self.every = every

    def __enter__(self) -> _Watch:
        self.entered += 1
        self.model.ms *= 20
        self.order.append("watched")
        return self

    def __exit__(self, *exc: object) -> None:
        self.model.ms /= 20

    def enough(self) -> bool:
        return self.entered >= self.wanted


def _watched_loop(
    wanted: int, min_runs: int, model: Sleepy | None = None, every: bool = False
) -> tuple[Any, _Watch, list[str]]:
    """A 0.5 ms model timed under a _Watch; the order of its batches, watched or timed."""
    model, feed, order = model or Sleepy(0.5), _feed(), []
    watch = _Watch(model, wanted, order, every)
    link = LocalLink(model, feed)
    run = link.run

    def logged(calls: Any, mode: str, outputs: Any, repeat: int = 0) -> Any:
        if calls and (order[-1:] != ["watched"] or model.ms < 1.0):  # an empty batch is no call's
            order.append("timed")
        return run(calls, mode, outputs, repeat)

    link.run = logged  # type: ignore[method-assign]
    loop = time_runner(link, feed, _layout(), dataclasses.replace(FAST, min_runs=min_runs), watch=watch)
    return loop, watch, order


def test_watched_batches_run_among_the_timed_ones_and_their_times_are_not_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from kbench.referee import timing
    from kbench.referee.timing import WATCH_MIN

    clock = _Clock()
    monkeypatch.setattr(timing, "_ns", clock)
    loop, watch, _ = _watched_loop(wanted=WATCH_MIN + 4, min_runs=10, model=Ticking(0.5, clock))
    facts = loop.stats.loop
    assert facts is not None
    assert facts.watched_batches == watch.entered >= watch.wanted  # more after the loop until enough
    # Every kept time is a 0.5 ms call's: a watched batch's 10 ms per call (1 in 4) is not among them.
    assert loop.stats.mean_ms == pytest.approx(0.5, rel=1e-6)
    assert loop.stats.median_ms == pytest.approx(0.5, rel=1e-6)
    assert facts.calls == loop.stats.n * facts.batch


def test_a_watch_of_every_batch_samples_each_timed_batch_and_keeps_its_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No timed batch runs unsampled, so a runner that can feel the sampling finds it everywhere: each timed
    batch is entered (its time, 20 times the model's here, kept), nothing is drawn beside them."""
    from kbench.referee import timing

    clock = _Clock()
    monkeypatch.setattr(timing, "_ns", clock)
    model = Ticking(0.5, clock)
    loop, watch, order = _watched_loop(wanted=0, min_runs=10, model=model, every=True)
    facts = loop.stats.loop
    assert facts is not None
    assert loop.stats.median_ms == pytest.approx(10.0) and loop.stats.mean_ms == pytest.approx(10.0)
    # every timed batch and the single-call ones after the loop (sampled alike), no other
    assert facts.watched_batches == loop.stats.n + facts.single_calls == watch.entered
    # a call alone costs what it costs in a batch here (the fake runner's calls take a fixed time each)
    assert facts.single_calls == SINGLE_CALLS and facts.single_call_ms == pytest.approx(loop.stats.median_ms)
    assert facts.calls == loop.stats.n * facts.batch and "timed" not in order[order.index("watched") :]


def test_watched_batches_are_drawn_in_among_the_timed_ones() -> None:
    inside = 0
    for _ in range(3):
        _, _, order = _watched_loop(wanted=0, min_runs=40)
        last_timed = max(i for i, kind in enumerate(order) if kind == "timed")
        inside += order[:last_timed].count("watched")
    assert inside >= 3  # about 1 in 4 of 3 x 40 timed batches, not only after the loop


def test_wilson_upper_bounds_a_share_by_its_samples() -> None:
    from kbench.referee.cpushare import wilson_upper

    assert wilson_upper(0.0, 60, 3.1) < 0.15  # no sample of 60 in its code: surely under 15 %
    assert wilson_upper(0.8, 30, 3.1) > 0.9  # an honest share is never bounded under itself
    assert wilson_upper(0.5, 10_000, 3.1) == pytest.approx(0.5155, abs=2e-3)
    assert wilson_upper(1.0, 5, 3.1) == 1.0


@pytest.mark.parametrize(("empty_ms", "deducted_ms"), [(0.3, 0.3), (5.0, 1.0)])
def test_a_call_alone_is_charged_less_an_empty_batch_never_more_than_the_calibration(
    monkeypatch: pytest.MonkeyPatch, empty_ms: float, deducted_ms: float
) -> None:
    """Each one-call batch after the loop is charged less a batch of no calls run just before it: less
    than the calibration's overhead where the loop's conditions make batches cheaper (0.3 against 1 ms),
    never more (a runner that answers empty batches slowly, 5 ms, cannot shrink its call alone)."""
    from kbench.referee import timing
    from kbench.referee.calibrate import Calibration

    clock = _Clock()
    monkeypatch.setattr(timing, "_ns", clock)
    model, feed = Ticking(0.5, clock), _feed()
    link = LocalLink(model, feed)
    link.calibration = Calibration(overhead_s=1e-3)  # type: ignore[attr-defined]
    run = link.run

    def costly(calls: Any, mode: str, outputs: Any, repeat: int = 0) -> Any:
        clock.now += int((1.0 if calls else empty_ms) * 1e6)  # every batch's own 1 ms, or an empty one's
        return run(calls, mode, outputs, repeat)

    link.run = costly  # type: ignore[method-assign]
    loop = time_runner(link, feed, _layout(), FAST)
    facts = loop.stats.loop
    assert facts is not None and facts.single_calls == SINGLE_CALLS
    # a batch of B calls: 1 ms + B x 0.5 ms, less the calibrated 1 ms; a call alone: 1.5 ms less the deduction
    assert loop.stats.median_ms == pytest.approx(0.5)
    assert facts.single_call_ms == pytest.approx(1.5 - deducted_ms)
