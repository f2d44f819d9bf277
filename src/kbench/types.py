"""The contract between stages: frozen dataclasses that cross a stage boundary.

problem -> prompt -> completion -> candidate -> check report -> build -> correctness/timing -> verdict.
Pydantic lives only where data touches disk or the wire (config.py, store.py); these are plain values.
"""

from __future__ import annotations

import enum
import hashlib
from dataclasses import dataclass, field, fields
from typing import Any, Literal

DTYPES = ("fp32", "fp16", "bf16")
# What a job is (sandbox/protocol.JobSpec.role); mypy's strict equality checks every comparison with one.
JobRole = Literal["candidate", "reference", "build"]
# Default correctness tolerance per dtype: |out-ref| <= tol*(min(1, rms(ref))+|ref|) (problems/compare.py).
DEFAULT_TOLERANCE: dict[str, float] = {"fp32": 1e-4, "fp16": 1e-2, "bf16": 1e-2}


class AllcloseTolerance(float):
    """A tolerance judged as torch.allclose(atol=tol, rtol=tol) judges, |out-ref| <= tol*(1+|ref|), instead
    of with an absolute term scaled by the output's magnitude: upstream KernelBench's rule, for runs under
    its protocol (protocols.py). A float, so it travels wherever a problem's tolerance does."""


@dataclass(frozen=True)
class Problem:
    """One reference problem in KernelBench's file format, as found in a source.

    `key` is the canonical address `SOURCE:LEVEL/NUMBER`. `code` is the file's text exactly as found;
    presets are applied when the problem is instantiated (problems/loader.py), never to `code`.
    """

    source: str
    level: int
    number: int
    name: str
    code: str
    path: str | None = None
    tags: tuple[str, ...] = ()
    presets: tuple[str, ...] = ()
    tolerance: tuple[tuple[str, float], ...] = ()
    description: str = ""

    @property
    def key(self) -> str:
        return f"{self.source}:{self.level}/{self.number}"

    @property
    def code_hash(self) -> str:
        return hashlib.sha256(self.code.encode()).hexdigest()[:16]

    def tol(self, dtype: str) -> float:
        return dict(self.tolerance).get(dtype, DEFAULT_TOLERANCE[dtype])


@dataclass(frozen=True)
class Prompt:
    problem_key: str
    backend: str
    text: str
    system: str = ""
    options: tuple[tuple[str, str], ...] = ()

    @property
    def digest(self) -> str:
        return hashlib.sha256((self.system + "\x00" + self.text).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Completion:
    model: str
    text: str
    sample: int = 0
    turn: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    latency_s: float = 0.0
    cached: bool = False
    error: str = ""


@dataclass(frozen=True)
class Candidate:
    """Untrusted source defining `ModelNew`. The host treats `source` as text only."""

    problem_key: str
    backend: str
    source: str
    origin: str = ""  # file path, model name, or replay path the source came from
    sample: int = 0
    turn: int = 0

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()[:16]


class Severity(str, enum.Enum):
    REJECT = "reject"
    WARN = "warn"


@dataclass(frozen=True)
class Finding:
    rule: str
    severity: Severity
    message: str
    line: int = 0


@dataclass(frozen=True)
class CheckReport:
    findings: tuple[Finding, ...] = ()

    @property
    def rejected(self) -> bool:
        return any(f.severity is Severity.REJECT for f in self.findings)


@dataclass(frozen=True)
class BuildResult:
    ok: bool
    backend: str
    seconds: float = 0.0
    cache_hit: bool = False
    log: str = ""
    kernels: tuple[str, ...] = ()  # kernel names the candidate's own source defines
    recipe: str = ""  # how the extension was built (backends/fastbuild.py): cache, light-headers+pch, ...
    status: str = ""  # when not ok: the verdict status the build earned (build_error, timeout, crashed, oom)
    message: str = ""  # when not ok: why, in one verdict message
    rule: str = ""  # when not ok: the rule its status carries (a build worker's forged result: result-forged)


class Status(str, enum.Enum):
    OK = "ok"
    STATIC_REJECT = "static_reject"
    BUILD_ERROR = "build_error"
    LOAD_ERROR = "load_error"
    RUNTIME_ERROR = "runtime_error"
    MISMATCH = "mismatch"
    CHEAT = "cheat"
    TIMEOUT = "timeout"
    CRASHED = "crashed"
    OOM = "oom"
    NO_CODE = "no_code"  # the completion held no usable candidate (extraction stage)


CPU_SAMPLE_PERIOD_NS = (
    500_000  # TimingSettings.sample_period_ns of native CPU candidates (referee/cpushare.py)
)


@dataclass(frozen=True)
class TimingSettings:
    """How referee/timing.py times one model; the same for the reference and the candidate."""

    budget_s: float = 5.0  # the loop stops here even if it has not run all its calls
    warmup_s: float = 0.25  # H200 SM clocks settle within ~100 ms of sustained load
    min_warmup: int = 5
    # CUDA: the warm-up may end after this long once the SM clock is settled at its maximum and the calls'
    # times have stopped moving (referee/timing.py); 0 turns that off (always warmup_s)
    settled_warmup_s: float = 0.05
    min_runs: int = 20  # batches of the loop at least
    # of the loop's calls: a shorter run samples one moment of the clock's wander
    min_time_s: float = 0.2
    target_batch_s: float = 0.01  # one batch's calls run about this long (referee/timing.py)
    max_batch: int = 2000
    flush_l2: bool = True  # the referee writes 2x the L2 before each batch (CUDA)
    threads: int = 0  # torch/OpenMP threads of a CPU runner (0: leave as is)
    # CPU, native candidates: every timed batch of the reference's loops and the candidate's runs under the
    # referee's sampling of whose code ran, a sample every this many ns of a thread's run time (0: none),
    # which slows both alike (referee/cpushare.py)
    sample_period_ns: int = 0


@dataclass(frozen=True)
class LoopFacts:
    """What the referee's timing loop did (referee/timing.py): its batches and calls, how its warm-up and
    its loop ended, and what it charged off the calls' windows (milliseconds per batch)."""

    batch: int = 0  # calls per batch
    calls: int = 0  # timed calls: n batches of `batch`
    checked: int = 0  # calls compared with the reference's output (a candidate's loop; referee/checks.py)
    warmup_s: float = 0.0  # the warm-up's one-call batches and the probe batches after them
    warmup_calls: int = 0  # the one-call batches
    warmup_end: str = ""  # settled (the SM clock at its maximum, the times level) | full
    stop: str = ""  # done | budget (ran past timing_budget_s) | flagged (a checked call was wrong)
    wall_s: float = 0.0  # the loop's wall time, the referee's own work included
    extra_checked_calls: int = 0  # calls run after the timed ones for the checks or the watch, not kept
    watched_batches: int = 0  # batches run under the sampling of whose code ran (referee/perfshare.py)
    active_s: float = 0.0  # the runner's windows: its commands' round trips, send to answer
    copy_ms: float = 0.0  # one copy of a batch's outputs as the referee takes it (referee/copies.py)
    overhead_ms: float = 0.0  # the calibrated cost of a batch beyond its work (referee/calibrate.py)
    copy_overhead_ms: float = 0.0  # the Copy command's calibrated round trip
    switch_ms: float = 0.0  # the calibrated switch back after the referee's snapshot
    # where a timed batch's seconds went: the referee's measures and the runner's own stamps (untrusted,
    # for the record only), part -> ms per batch
    split_ms: tuple[tuple[str, float], ...] = ()
    timing_lock_busy: bool = False  # another process held the device's timing lock past the loop's wait
    # native CPU candidates: the candidate's own code's share of the timed batches' samples, and how many
    # samples were counted (referee/cpushare.py)
    timed_kernel_share: float | None = None
    timed_share_samples: int = 0
    # a call alone: the least of SINGLE_CALLS one-call batches run after the loop, each less the same
    # deductions but for the Run's, which is a batch of no calls run just before it, capped by the
    # calibration's (ms); None where the batches held one call. The batch-together rule sets it against
    # the time per call in batches (evaluate/judge.py `check_batching`)
    single_call_ms: float | None = None
    single_calls: int = 0
    # the runner's processes' CPU seconds over the loop from its first timed batch on, read from outside
    # (/proc), against `active_s` of the same batches: the CPU's `cheat cpu-cores` (referee/candidate.py)
    runner_cpu_s: float | None = None


@dataclass(frozen=True)
class ClockFacts:
    """The GPU's SM clock, temperature and clock-limit reasons over a timing loop (referee/gpu_clock.py)."""

    sm_clock_mhz: tuple[float, float] = (0.0, 0.0)  # least, most
    temp_c: tuple[float, float] = (0.0, 0.0)  # least, most
    clocks_moved: bool = False  # the SM clock moved more than 5 % (a warning in the verdict)
    clock_samples: int = 0
    clock_limits: tuple[str, ...] = ()  # NVML's reasons that held the clock down (power cap, thermal)


@dataclass(frozen=True)
class Provenance:
    """Where a baseline's stats came from (store/reuse.py) and the timing settings they were taken with."""

    source: str = ""  # measured | cache | run | store
    timing_settings: str = ""  # canonical JSON (store/reuse.settings_text); "" where not recorded
    stored_at: str = ""  # when the results store filed it (source: store)


@dataclass(frozen=True)
class UpstreamFacts:
    """What an upstream KernelBench baseline file said beside its statistics (baselines/storage.py)."""

    hardware: str = ""
    max_ms: float | None = None  # the file's `max`, where it held one
    median_known: bool = False  # the file held a median (else median_ms is its mean)


@dataclass(frozen=True)
class TimingStats:
    """Statistics of one timed callable, in milliseconds. `meaningful` is False for interpreter runs.
    The groups of facts beside them are None where they do not apply: `loop` for a referee's loop, `clock`
    for a GPU whose clock NVML read, `provenance` for a baseline, `upstream` for an imported one."""

    median_ms: float
    mean_ms: float
    std_ms: float
    iqr_ms: float
    min_ms: float
    n: int
    rse: float  # relative standard error of the mean
    device: str = "cpu"
    method: str = "referee-batches"  # how it was measured (referee/timing.py)
    meaningful: bool = True
    loop: LoopFacts | None = None
    clock: ClockFacts | None = None
    provenance: Provenance | None = None
    upstream: UpstreamFacts | None = None


# Records written before TimingStats held its facts in groups carry them as `extra`, a list of [key,
# value] pairs, each key a group's field name, but for `timing_lock` ("busy") and the pairs whose value
# lists several of the loop's fields
_GROUP_OF = {
    **dict.fromkeys((f.name for f in fields(LoopFacts)), "loop"),
    **dict.fromkeys((f.name for f in fields(ClockFacts)), "clock"),
    **dict.fromkeys((f.name for f in fields(Provenance)), "provenance"),
    **dict.fromkeys((f.name for f in fields(UpstreamFacts)), "upstream"),
}
_LOOP_LISTS = {
    "warmup": ("warmup_s", "warmup_calls", "warmup_end"),  # (seconds, calls, "settled" | "full")
    "timed_kernel_share": ("timed_kernel_share", "timed_share_samples"),  # (share, samples)
}


def timing_record(data: Any) -> Any:
    """A stored TimingStats record (JSON data) with its `extra` pairs, if any, moved into the groups'
    fields; a key no group knows is dropped. Any other data is returned as it is."""
    if not isinstance(data, dict) or "extra" not in data:
        return data
    groups: dict[str, dict[str, Any]] = {}
    for pair in data["extra"] or ():
        if not isinstance(pair, list | tuple) or len(pair) != 2 or not isinstance(pair[0], str):
            continue
        key, value = pair
        if key in _LOOP_LISTS:
            names = _LOOP_LISTS[key]
            if isinstance(value, list | tuple) and len(value) == len(names):
                groups.setdefault("loop", {}).update(zip(names, value, strict=True))
        elif key == "timing_lock":
            groups.setdefault("loop", {})["timing_lock_busy"] = value == "busy"
        elif key in _GROUP_OF:
            groups.setdefault(_GROUP_OF[key], {})[key] = value
    out = {k: v for k, v in data.items() if k != "extra"}
    return out | {name: facts for name, facts in groups.items() if name not in out}


@dataclass(frozen=True)
class Correctness:
    passed: bool
    seeds: tuple[int, ...] = ()
    max_abs_err: float = 0.0
    mean_abs_err: float = 0.0
    max_rel_err: float = 0.0
    report: str = ""  # mismatch report: first differing indices and values
    seeds_passed: int | None = None  # of `seeds`, those every output passed on (None: a record without it)


@dataclass(frozen=True)
class Verdict:
    """The one outcome of evaluating one candidate. Every evaluation ends in exactly one status."""

    status: Status
    problem_key: str
    backend: str
    preset: str
    dtype: str
    device: str
    message: str = ""
    rule: str = ""  # the protocol or static rule that fired, for cheat/static_reject
    log_tail: str = ""
    candidate_digest: str = ""
    checks: CheckReport = field(default_factory=CheckReport)
    build: BuildResult | None = None
    correctness: Correctness | None = None
    timing: TimingStats | None = None
    baselines: tuple[tuple[str, TimingStats], ...] = ()  # mode -> stats (eager, compile, ...)
    kernel_share: float | None = None  # share of device time in the candidate's own kernels
    sol_ms: float | None = None
    warnings: tuple[str, ...] = ()
    seconds: float = 0.0  # wall time of the whole evaluation
    phases: tuple[tuple[str, float], ...] = ()  # where the seconds went: ref.* / cand.* worker phases
    generalizes: bool | None = None  # also correct at hidden sizes (--hidden-shapes); None: not checked
    hidden: str = ""  # the hidden-shape check: its sizes and result, or why it was not made (not feedback)
    # the candidate worker's OS confinement: "landlock abi N", or "none: WHY" when it ran unconfined; ""
    # when no candidate worker ran (static reject, failed build)
    confinement: str = ""
    # a training problem's forward pass timed alone (the step's time is `timing`, `baselines`): "candidate"
    # and each baseline mode -> stats; a backward's time is its step's less its forward's (`pass_ms`)
    forward: tuple[tuple[str, TimingStats], ...] = ()

    @property
    def ok(self) -> bool:
        return self.status is Status.OK

    def baseline(self, mode: str) -> TimingStats | None:
        return dict(self.baselines).get(mode)

    def speedup(self, mode: str = "eager") -> float | None:
        base = self.baseline(mode)
        if not self.ok or base is None or self.timing is None or self.timing.median_ms <= 0:
            return None
        return base.median_ms / self.timing.median_ms

    def pass_ms(self, which: str, pass_: str) -> float | None:
        """A training step's median time of one pass: `which` is "candidate" or a baseline mode, `pass_`
        "step", "forward" or "backward" (the step's less the forward's; None where that is not positive)."""
        step = self.timing if which == "candidate" else self.baseline(which)
        forward = dict(self.forward).get(which)
        if pass_ == "step":
            return step.median_ms if step is not None else None
        if forward is None:
            return None
        if pass_ == "forward":
            return forward.median_ms
        if step is None or step.median_ms <= forward.median_ms:
            return None
        return step.median_ms - forward.median_ms

    def pass_speedup(self, pass_: str, mode: str = "eager") -> float | None:
        """A training step's speedup over `mode` for one pass ("step", "forward", "backward")."""
        mine, base = self.pass_ms("candidate", pass_), self.pass_ms(mode, pass_)
        if not self.ok or mine is None or base is None or mine <= 0:
            return None
        return base / mine
