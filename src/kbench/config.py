"""One run configuration: defaults < config file (TOML or JSON) < KBENCH_* environment < CLI flags.

The resolved config is stored with every run record, so a result always says how it was produced.
"""

from __future__ import annotations

import difflib
import json
import os
import shutil
import time
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import PydanticUndefined

from kbench.backends import check_backend_name, default_backend
from kbench.errors import ConfigError
from kbench.files import default_cache_dir
from kbench.types import JobRole, TimingSettings

ENV_PREFIX = "KBENCH_"
# KBENCH_* variables that are not settings: kbench sets them for its own child processes, or they hold a
# secret that must not be stored with a run, or they act before any setting is read, or the test suite
# marks the processes it starts. Any other KBENCH_* variable must name a RunConfig field (`env_overrides`).
INTERNAL_ENV = frozenset(
    {
        "KBENCH_OWNER",  # sandbox/procs.py: the kbench process that owns a worker
        "KBENCH_PARENT",  # sandbox/procs.py: a spawned worker's parent
        "KBENCH_KEY_FIFO",  # sandbox/protocol.py: a forked worker's HMAC key
        "KBENCH_BUILD_RECIPE",  # backends/fastbuild.py: the build recipe the host chose for a build worker
        "KBENCH_BUILD_PCH",
        "KBENCH_BUILD_OP_HEADERS",
        "KBENCH_SERVE_TOKEN",  # serve/server.py: a secret, never stored with a run
        "KBENCH_MCP_TOKEN",  # cli/mcp.py: the same, for `kbench mcp --http`
        "KBENCH_PYCACHE",  # bytecode.py: read by the entry point before any setting is
        "KBENCH_TEST_TAG",  # tests and benchmarks: marks on the processes they start
    }
)
LEASE_GRACE_S = 30.0  # a GPU worker gives up its lease wait first, with a clear message; the host after this
# With several samples and no temperature given: one that makes samples differ. At 0 a server answers
# the same prompt with the same text, and pass@k over k identical samples is pass@1 counted k times.
SAMPLING_TEMPERATURE = 0.7
# Speedups within this factor of a threshold p are "uncertain", never fast (metrics.py): timings of one
# callable in two fresh processes differ by up to ~1 % (docs/metrics.md, Timing), more than a timing's own
# interval says.
NOISE_FLOOR = 0.01


_REF: dict[str, Any] = {"reference": True}


def _ref(default: Any = PydanticUndefined, **kw: Any) -> Any:
    """A RunConfig field a reference run depends on (RunConfig.reference_fields, reference_pool.py)."""
    return Field(default, json_schema_extra=_REF, **kw)


class _RegisteredBackends:
    """A backend name's JSON schema lists the registered backends (read when a schema is made, OpenAPI's,
    after any plugin registered)."""

    def __get_pydantic_json_schema__(self, core: Any, handler: Any) -> dict[str, Any]:
        from kbench.backends import backend_names

        schema: dict[str, Any] = handler(core)
        schema["enum"] = backend_names()
        return schema


# A registered backend's name (backends/__init__.py), checked when a setting or a request names one.
BackendName = Annotated[str, AfterValidator(check_backend_name), _RegisteredBackends()]


def gpu_default_backend() -> str:
    """RunConfig's backend when none is named: the GPU's default (a machine without a GPU switches to the
    CPU's where the caller left it out, defaults.device_defaults)."""
    return default_backend(gpu=True)


FIXED_SEED_BASE = 1000  # the evaluator's fixed seeds: FIXED_SEED_BASE + i for i < RunConfig.seeds

SHM = Path("/dev/shm")
SCRATCH_MIN_FREE = 64 << 30  # bytes a memory file system must have free to hold job folders


def scratch_root(cfg: RunConfig) -> Path:
    """The folder under which a verdict's job folder is made: the workers write there every output they
    are checked on and the host reads them back -- GiBs per verdict for the full preset's largest problems,
    5-25 s per job on an H200 host. `auto`: /dev/shm when it and the host's available memory both have
    64 GiB free, else the cache folder; `cache`: the cache folder;
    anything else is a path. Job folders left by processes that died (untouched for an hour) are removed.
    """
    if cfg.scratch_dir == "cache":
        return cfg.cache_dir
    if cfg.scratch_dir != "auto":
        root = Path(cfg.scratch_dir).expanduser()
    elif _roomy(SHM):
        root = SHM / f"kbench-{os.getuid()}"
    else:
        return cfg.cache_dir
    root.mkdir(parents=True, exist_ok=True)
    _sweep(root)
    return root


def _roomy(path: Path) -> bool:
    """A writable memory file system with SCRATCH_MIN_FREE free, in its own limit and in the host's
    available memory (its files are memory; asked again for every job folder)."""
    try:
        if not (path.is_dir() and os.access(path, os.W_OK)):
            return False
        return min(shutil.disk_usage(path).free, mem_available()) >= SCRATCH_MIN_FREE
    except OSError:
        return False


def mem_available() -> int:
    """The host's MemAvailable in bytes (0 where /proc/meminfo is missing)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


STALE_JOB_S = 3600.0  # a job folder untouched this long whose process is gone is left over
_swept: set[Path] = set()


def _sweep(root: Path) -> None:
    """Once per process and root: remove job folders (`kbench-job-PID-*`) whose host process is gone and
    that nothing wrote to for an hour (a host in another PID namespace sharing the folder is alive)."""
    if root in _swept:
        return
    _swept.add(root)
    now = time.time()
    for entry in root.glob("kbench-job-*-*"):
        pid = entry.name.split("-")[2]
        try:
            stale = now - entry.stat().st_mtime > STALE_JOB_S
        except OSError:
            continue
        if stale and pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(entry, ignore_errors=True)


def job_prefix() -> str:
    """Prefix of this process's job folders (`_sweep` reads the PID from it)."""
    return f"kbench-job-{os.getpid()}-"


class RunConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    # problems
    source: str = "kbench"
    level: int | None = None
    problems: list[str] = Field(default_factory=list)  # addresses; empty = all of the level/source
    tags: list[str] = Field(default_factory=list)
    limit: int | None = None  # the first N selected problems
    preset: str = _ref("full")
    dtype: Literal["fp32", "fp16", "bf16"] = _ref("fp32")
    device: str = "auto"  # auto | cpu | cuda | cuda:N

    # candidates
    backend: BackendName = Field(default_factory=gpu_default_backend)
    static_checks: bool = True

    # generation
    model: str = ""  # PROVIDER/MODEL, e.g. openai/gpt-4o, anthropic/claude-..., replay/PATH
    base_url: str | None = None
    api_key_env: str | None = None  # environment variable holding the API key (default: the provider's)
    # None: 0 for one sample, SAMPLING_TEMPERATURE for several (`sampling_temperature`)
    temperature: float | None = Field(default=None, ge=0.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)  # None: the server's default (not sent)
    max_tokens: int = Field(default=8192, ge=1)
    reasoning_effort: str | None = None
    samples: int = Field(default=1, ge=1)
    turns: int = Field(default=1, ge=1)
    concurrency: int = 8
    shots: Literal["zero", "one", "few"] = "one"
    hardware_facts: str | None = None  # GPU name for the prompt's hardware facts
    chain_of_thought: bool = False
    response_cache: bool = True  # reuse cached answers to identical requests (llm/cache.py)
    # retries of one request on 429, 5xx, timeouts and refused connections (the SDKs' backoff)
    llm_retries: int = Field(default=8, ge=0)
    solution_backends: list[str] = Field(default_factory=list)  # `run --solutions`: the shipped sets run
    # `run --agent`: a tool-calling model works each problem with kbench's MCP tools (agent/loop.py), one
    # session per sample, within these budgets each (None: no limit); its one submit is the verdict
    agent: bool = False
    agent_max_calls: int = Field(default=40, ge=1)  # tool calls
    agent_max_evals: int | None = Field(default=20, ge=1)  # check + evaluate calls
    agent_max_tokens: int | None = Field(default=400_000, ge=1)  # input + output tokens, all answers
    agent_max_wall_s: float | None = Field(default=3600.0, gt=0)  # the session's wall time
    agent_max_device_s: float | None = Field(default=None, gt=0)  # seconds of check/evaluate (GPU seconds)

    # evaluation
    seeds: int = _ref(3)  # fixed seeds; one more per-run secret seed is added
    # Budgets, in seconds, of each phase of a worker (sandbox/host.py kills it past one, naming the phase)
    timeout_s: float = 60.0  # each phase of a candidate: load, correctness, timing (unless set below)
    load_timeout_s: float | None = None  # importing the (prebuilt) candidate and constructing ModelNew
    correctness_timeout_s: float | None = None  # the correctness calls, the kernel-use profile
    timing_timeout_s: float | None = None  # default: timeout_s, or 4 x timing_budget_s when longer
    build_timeout_s: float = 600.0  # compiling a candidate's extensions (the build worker)
    reference_timeout_s: float = 900.0  # the trusted reference worker: outputs, baseline compiles and timing
    lease_wait_s: float = 600.0  # longest wait for a GPU another evaluation's worker holds, then an error
    memory_limit_gb: float = 16.0  # host memory limit (RLIMIT_AS) of a candidate worker
    # Candidate and build workers confine themselves with Landlock (sandbox/confine.py): writes only to
    # their own folders, no TCP, no signals out. False only to debug a candidate the confinement breaks.
    confine: bool = True
    # GPU: a candidate's correctness outputs go into device buffers this process owns and are compared
    # there (evaluate/device_outputs.py); False: through files in the job folder, compared on the CPU.
    device_outputs: bool = True
    timing_budget_s: float = _ref(5.0)
    baselines: list[str] = _ref(default_factory=lambda: ["eager", "compile"])
    reuse_baselines: bool = True  # use stored baselines of this GPU/torch/timing settings (store/reuse.py)
    measure: bool = _ref(True)  # time the candidate and the baselines (False: correctness and protocol only)
    # CUDA: end the warm-up after 0.05 s once the SM clock is settled at its maximum (False: always 0.25 s)
    timing_settled_warmup: bool = _ref(True)
    # how long one timed batch of calls runs (referee/timing.py): its command's round trip is the same share
    # of every job's calls
    timing_batch_ms: float = _ref(TimingSettings.target_batch_s * 1e3, gt=0.0)
    # The share of a call's time the candidate's own kernels must take (rule no-custom-kernel): always
    # measured and reported (the device's on a GPU, the CPU's sampled from outside on the CPU), enforced
    # above 0. Whether they do the work at all is the ablation's to say (referee/candidate.py): a GEMM in a
    # library with an epilogue of the candidate's own is honest fusion at a share of a few percent.
    min_kernel_share: float = Field(default=0.0, ge=0.0, le=1.0)
    noise_floor: float = Field(default=NOISE_FLOOR, ge=0.0)  # speedup spread counted as noise (metrics.py)
    # the rules of correctness and fast_p: protocols.PROTOCOLS' names (kernelbench: upstream's published rules)
    protocol: Literal["kbench", "kernelbench"] = "kbench"
    init_seed: int = _ref(42)  # seed for Model/ModelNew construction (KernelBench's semantics)
    hidden_shapes: bool = (
        False  # an ok candidate is checked again at sizes drawn per evaluation (evaluate/hidden.py)
    )
    cuda_arch: str = "9.0"  # TORCH_CUDA_ARCH_LIST for builds on a host without a GPU (prebuild)
    compile_arch: str = "sm_90"  # the GPU arch Triton candidates are compile-checked for (candidate worker)
    cpu_threads: int = _ref(1)  # torch/OpenMP threads of CPU workers, the same for reference and candidate
    cpu_timing_budget_s: float = _ref(1.0)  # cap of the per-callable timing budget on the CPU
    # evaluations at once on a CPU device, each lane's workers on `cpu_threads` cores of their own; with
    # timing, at most the usable cores / cpu_threads (executors/local.py). 0: one lane when timing, else
    # one per `cpu_threads` usable cores
    cpu_lanes: int = Field(default=0, ge=0)
    cpu_lane: int = Field(default=0, ge=0)  # set per evaluation by its lane: whose cores its workers run on
    executor: str = "local"
    builders: int = 0  # CPU build workers; 0 = half the cores less two per GPU (executors/local.py)
    gpu_slots: int = 3  # evaluations in flight per GPU; their GPU phases take turns (sandbox/lease.py)
    fast_builds: bool = True  # light CUDA headers + precompiled torch headers, falling back to a plain build
    precompiled_headers: Literal["auto", "on", "off"] = "auto"  # auto: builders make one for big batches
    op_headers: bool = True  # nvcc sees only the ATen operators a CUDA source names (with fast_builds)
    worker_start: Literal["auto", "fork", "spawn"] = "auto"  # fork: from a warm starter (sandbox/starter.py)
    ray_address: str | None = None
    ray_tmp: Path | None = None  # a local Ray cluster's temp folder (None: a new temp folder)
    lease_dir: Path | None = None  # the GPU lease files (sandbox/lease.py); None: TMPDIR/kbench-gpu-leases
    hf_dataset: str = "ScalingIntelligence/KernelBench"  # the dataset of source `hf` (problems/sources.py)

    # storage
    store: Path = Path("kbench-runs/kbench.db")
    cache_dir: Path = _ref(default_factory=default_cache_dir)
    # the reference disk cache's size (cache_dir/reference): least recently used entries go first; None: no limit
    reference_cache_gb: float | None = Field(default=20.0, gt=0)
    # no evaluation starts with less free on the cache or scratch file system, and a failed verdict found
    # with less is not recorded (it may be a build or a write that found no room); 0: never checked
    min_free_disk_gb: float = Field(default=1.0, ge=0)
    scratch_dir: str = "auto"  # job folders: "auto" (memory file system if roomy), "cache", or a path
    run_id: str | None = None

    @classmethod
    def reference_fields(cls) -> tuple[str, ...]:
        """The fields a reference run depends on (marked `_REF`); the rest concern the candidate or the run."""
        return tuple(n for n, f in cls.model_fields.items() if (f.json_schema_extra or {}) == _REF)

    @property
    def sampling_temperature(self) -> float:
        """The temperature requests are sent with: the configured one, else 0 for a single sample and
        SAMPLING_TEMPERATURE for several (so samples differ)."""
        if self.temperature is not None:
            return self.temperature
        return SAMPLING_TEMPERATURE if self.samples > 1 else 0.0

    def budgets(self, role: JobRole) -> dict[str, float]:
        """Seconds per phase of a worker of `role`, in the order it announces them (sandbox/host.py)."""
        lease = self.lease_wait_s + LEASE_GRACE_S  # the worker gives up first, with a clear message
        if role == "build":
            # the candidate's own import (its code, outside the compiles it asks for) has the load
            # budget; each compile the referee runs for it has the build budget (referee/session.py
            # counts compiles out of the phase): a candidate that sleeps at import holds a builder for
            # load_timeout_s, not build_timeout_s
            return {"load": self.load_timeout_s or self.timeout_s, "build": self.build_timeout_s}
        if role == "reference":
            return {"load": self.reference_timeout_s, "lease": lease, "reference": self.reference_timeout_s}
        timing = self.timing_timeout_s or max(self.timeout_s, 4 * self.timing_budget_s)
        return {
            "receive": self.reference_timeout_s,  # waiting for the host's buffers: the reference's time
            "lease": lease,
            "load": self.load_timeout_s or self.timeout_s,
            "build": self.build_timeout_s,  # a build the candidate's import asked for (referee/builds.py)
            "correctness": self.correctness_timeout_s or self.timeout_s,
            "settle": self.reference_timeout_s,  # waiting for the reference's write and the host's read
            "timing": timing,
        }


# The setting that sets each phase's budget (RunConfig.budgets), named in a timeout's message.
PHASE_SETTINGS = {
    "load": "load_timeout_s",
    "correctness": "correctness_timeout_s",
    "timing": "timing_timeout_s",
    "build": "build_timeout_s",
    "reference": "reference_timeout_s",
    "receive": "reference_timeout_s",
    "settle": "reference_timeout_s",
}


def _coerce_env(name: str, raw: str) -> Any:
    field = RunConfig.model_fields[name]
    if "list" in str(field.annotation):
        if raw.strip().startswith("["):  # a JSON list, as a config file writes one
            try:
                return json.loads(raw)
            except json.JSONDecodeError as exc:
                raise ConfigError(
                    f"KBENCH_{name.upper()}: not a JSON list ({exc.msg}); or give a,b,c"
                ) from None
        return [x.strip() for x in raw.split(",") if x.strip()]
    return raw


def env_overrides(environ: dict[str, str] | None = None) -> dict[str, Any]:
    """The settings given as KBENCH_<FIELD> variables; any other KBENCH_* variable (not in INTERNAL_ENV) is
    an error naming the close matches, so a misspelt setting never silently does nothing."""
    environ = dict(os.environ if environ is None else environ)
    out: dict[str, Any] = {}
    for key, raw in environ.items():
        if not key.startswith(ENV_PREFIX) or key in INTERNAL_ENV:
            continue
        name = key[len(ENV_PREFIX) :].lower()
        if name not in RunConfig.model_fields:
            raise ConfigError(_unknown_env(key))
        out[name] = _coerce_env(name, raw)
    return out


def _unknown_env(key: str) -> str:
    known = [ENV_PREFIX + name.upper() for name in RunConfig.model_fields]
    close = difflib.get_close_matches(key, known, n=3, cutoff=0.6)
    hint = f"did you mean {' or '.join(close)}?" if close else "a setting is KBENCH_ + a RunConfig field name"
    return f"environment variable {key} is not a kbench setting: {hint} (unset it to go on)"


def read_file(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config file ({exc.strerror})") from None
    try:
        data = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(
            f"{path}: not valid {'TOML' if path.suffix == '.toml' else 'JSON'}: {exc}"
        ) from None
    return dict(data.get("kbench", data))


def resolve(
    file: Path | None = None, flags: dict[str, Any] | None = None, environ: dict[str, str] | None = None
) -> RunConfig:
    """Merge defaults, file, KBENCH_* environment and flags (flags set to None are ignored)."""
    merged: dict[str, Any] = {}
    if file is not None:
        merged.update(read_file(file))
    merged.update(env_overrides(environ))
    merged.update({k: v for k, v in (flags or {}).items() if v is not None})
    try:
        return RunConfig(**merged)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        raise ConfigError(f"bad config value for '{where}': {first['msg']}") from None
