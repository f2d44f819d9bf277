"""The messages between a job's referee (kbench/referee/) and its runner (worker/runner.py), typed.

The referee commands, the runner answers; the runner asks one thing of its own accord, a build
(`BuildRequest`, answered by `BuildAnswer`). Nothing here is secret: the runner never learns a seed, which
calls are checked, the job's key or any expected output. Every answer from the runner is untrusted data
the referee validates (sandbox/channel.py rejects anything else).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from kbench.sandbox.slots import SlotRef
from kbench.types import JobRole, Problem


class _Message(BaseModel):
    model_config = ConfigDict(extra="forbid")


# --- referee -> runner ----------------------------------------------------------------------------------


class Setup(_Message):
    """The runner's walls, sent before anything of the job: namespaces and limits (None: none, for the
    trusted reference), the cores it runs on, the folders Landlock lets it write and read (None: reads
    unrestricted), its environment's additions and its memory file system for temporary files."""

    kind: Literal["setup"] = "setup"
    walls: dict[str, Any] | None = None  # isolate.Walls as a dict
    cores: list[int] = Field(default_factory=list)
    confine: bool = False
    writes: list[str] = Field(default_factory=list)
    reads: list[str] | None = None
    env: dict[str, str] = Field(default_factory=dict)
    tmp: str = ""  # a folder the runner covers with its capped memory file system (what it held copied in)
    cwd: str = ""
    memory: tuple[str, int] | None = None  # (RLIMIT name, bytes)


class RunnerSpec(_Message):
    """What a runner needs to build its model and serve calls (no seeds, no checks, no key)."""

    kind: Literal["spec"] = "spec"
    role: JobRole
    problem: Problem | None = None
    preset: str = ""
    dtype: str = "fp32"
    device: str = "cpu"
    backend: str = ""
    candidate_file: str = ""
    kernel_names: list[str] = Field(default_factory=list)
    init_seed: int = 42
    cache_dir: str = ""
    compile_arch: str = "sm_90"
    threads: int = 0
    baselines: list[str] = Field(default_factory=list)  # reference: the modes it serves (eager, compile...)
    early_cuda: bool = False  # start CUDA before the first command, where no timing loop runs


class Bind(_Message):
    """Map these slots (their memory files come with the message on the CPU)."""

    kind: Literal["bind"] = "bind"
    slots: list[SlotRef]


class Release(_Message):
    kind: Literal["release"] = "release"
    slots: list[int]


class Call(_Message):
    inputs: int  # the input slot
    literals: list[Any] = Field(default_factory=list)  # the non-tensor inputs, in order (None: a tensor)


class Run(_Message):
    """Run the model once per call, back to back, keep the outputs, synchronise, answer `Ran`.

    Compact, since a timed batch's command is on the referee's clock: each call's input slot, and each
    call's entry in the distinct lists of non-tensor inputs (`Run.of` makes it from calls)."""

    kind: Literal["run"] = "run"
    inputs: list[int] = []  # each call's input slot, in order
    literals: list[list[Any]] = []  # the distinct lists of non-tensor inputs (None: a tensor)
    which: list[int] = []  # each call's entry in `literals`
    mode: str = ""  # reference: which baseline mode serves the calls
    # the ablation call: what the candidate's own kernels produce is made NaN (backends KernelRecorder)
    ablate: bool = False
    # the output slots the calls' outputs are copied into, in order, before the synchronise; none: the
    # outputs are kept for a later `Copy` (a timed batch's, so the copy has a window of its own). With no
    # calls: a calibration batch (referee/calibrate.py), known work on these slots: 1 added `repeat` times
    outputs: list[int] = []
    repeat: int = Field(default=0, ge=0, le=1000)

    @model_validator(mode="after")
    def _entries(self) -> Run:
        if len(self.which) != len(self.inputs) or any(not 0 <= i < len(self.literals) for i in self.which):
            raise ValueError("each call needs one entry of `literals`")
        return self

    @classmethod
    def of(cls, calls: list[Call], **fields: Any) -> Run:
        import json

        index: dict[Any, int] = {}
        literals: list[list[Any]] = []
        which = []
        for call in calls:
            key: Any = tuple((type(v), v) for v in call.literals)  # 1, 1.0 and True are different
            try:
                hash(key)
            except TypeError:  # a list or a dict among them
                key = json.dumps(call.literals, sort_keys=True, default=repr)
            if key not in index:
                index[key] = len(literals)
                literals.append(call.literals)
            which.append(index[key])
        # made here by trusted code, so not validated again (a timed batch's command is on the clock)
        return cls.model_construct(inputs=[c.inputs for c in calls], literals=literals, which=which, **fields)

    def calls(self) -> list[tuple[int, list[Any]]]:
        """Each call's input slot and its non-tensor inputs."""
        return [(slot, self.literals[i]) for slot, i in zip(self.inputs, self.which, strict=True)]


class Copy(_Message):
    """Copy the outputs the last `Run` kept into these output slots (one per call), synchronise, answer."""

    kind: Literal["copy"] = "copy"
    outputs: list[int]


class Profile(_Message):
    """Run one call under the kernel-use profiler."""

    kind: Literal["profile"] = "profile"
    call: Call


class Guard(_Message):
    kind: Literal["guard"] = "guard"
    when: str


class CompileCheck(_Message):
    kind: Literal["compile_check"] = "compile_check"


class Load(_Message):
    kind: Literal["load"] = "load"


class Place(_Message):
    """Move the model to its device (the reference, once its referee holds the GPU lease)."""

    kind: Literal["place"] = "place"


class Quit(_Message):
    kind: Literal["quit"] = "quit"


Command = (
    Setup | RunnerSpec | Bind | Release | Run | Copy | Profile | Guard | CompileCheck | Load | Place | Quit
)


# --- runner -> referee ----------------------------------------------------------------------------------


class Failed(_Message):
    """The command failed: a candidate's failure as data (status, message, rule)."""

    kind: Literal["failed"] = "failed"
    status: str
    message: str = ""
    rule: str = ""


class Ready(_Message):
    kind: Literal["ready"] = "ready"
    confinement: str = ""
    phases: dict[str, float] = Field(default_factory=dict)


class Loaded(_Message):
    kind: Literal["loaded"] = "loaded"
    build_seconds: float = 0.0
    build_cache_hit: bool = True
    build_recipe: str = ""
    build_log: str = ""
    phases: dict[str, float] = Field(default_factory=dict)


class OutputMeta(_Message):
    """One output of one call as the runner saw it; `type` is the class's name when it is not a plain
    torch.Tensor."""

    dtype: str = ""
    shape: list[int] = Field(default_factory=list)
    device: str = ""
    type: str = "Tensor"
    aliases: int = -1  # the input it shares storage with, -1: none


class Ran(_Message):
    """The calls' outputs as the runner saw them, compact: the distinct per-call descriptions (`kinds`) and
    each call's entry among them (`which`); `per_call` expands them."""

    kind: Literal["ran"] = "ran"
    kinds: list[list[OutputMeta]] = []
    which: list[int] = []
    seconds: float = 0.0  # the runner's own clock around the calls: reported, never trusted
    # the runner's monotonic clock (ns) when it had the command, had launched the calls, had launched the
    # copy, had synchronised: reported in the timing loop's split, never trusted
    stamps: list[int] = []

    @model_validator(mode="after")
    def _entries(self) -> Ran:
        if any(not 0 <= i < len(self.kinds) for i in self.which):
            raise ValueError("a call's entry is not among `kinds`")
        return self

    def per_call(self) -> list[list[OutputMeta]]:
        return [self.kinds[i] for i in self.which]


class Copied(_Message):
    kind: Literal["copied"] = "copied"


class Profiled(_Message):
    kind: Literal["profiled"] = "profiled"
    ran: list[str] = Field(default_factory=list)
    share: float | None = None
    library: list[str] = Field(default_factory=list)


class Guarded(_Message):
    kind: Literal["guarded"] = "guarded"
    rule: str = ""
    message: str = ""


class Checked(_Message):
    kind: Literal["checked"] = "checked"
    ok: bool = True
    log: str = ""


class BuildRequest(_Message):
    """A `load_inline` call the runner's candidate made: its arguments, for the referee's trusted builder."""

    kind: Literal["build"] = "build"
    arguments: dict[str, Any]


class Bound(_Message):
    kind: Literal["bound"] = "bound"


Answer = Failed | Ready | Loaded | Ran | Copied | Profiled | Guarded | Checked | Bound
FromRunner = Answer | BuildRequest


class BuildAnswer(_Message):
    kind: Literal["built"] = "built"
    ok: bool
    folder: str = ""  # the finished build's folder in the build cache
    name: str = ""  # the module name to import from it
    log: str = ""
    recipe: str = ""
    seconds: float = 0.0
    cache_hit: bool = False
    errors: dict[str, str] = Field(default_factory=dict)  # each failed recipe's error (fastbuild.py)
    pch_seconds: float | None = None  # a precompiled header made beside the build
