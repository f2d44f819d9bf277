"""The anti-cheat fixture suite: candidates that must get a known verdict, run against the evaluator.

Fixtures live in the package (`kbench/selftest/fixtures/<problem>/{correct,wrong}/<name>.<backend>.py`)
next to a self-contained `problem.py` per folder. Each fixture starts with header comments:

    # expect: STATUS [RULE] [| STATUS [RULE] ...]   the verdicts that count as caught (alternatives: |)
    # static: off                                   run with static checks disabled (tests the runtime rule)
    # timeout: SECONDS                              the worker's wall-clock limit for this fixture
    # requires: gpu | cpus                          needs a CUDA device (cuda fixtures always do), or 2 CPUs
    # min-ms: MILLISECONDS                          an `ok` must have been timed at least this slow (the
                                                    candidate's forged speed must not show)
    # warns: RULE                                   a warning finding the verdict must carry
    # include: FILE                                 completed with FILE's text first (a shared source)

The evaluator's own test fixtures (tests/fixtures/eval/) use the same header, read by `parse_header`.

Alternatives exist where two checks legitimately race to catch one trick (e.g. memoisation by pointer is
caught by correctness when the allocator reuses an address, by the timing re-check otherwise).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from kbench.backends import get_backend
from kbench.config import RunConfig
from kbench.errors import ConfigError, MissingExtraError
from kbench.types import Problem, Verdict

if TYPE_CHECKING:
    from kbench.api import Evaluator, Submission

_KEYS = ("expect", "static", "timeout", "requires", "warns", "include", "min-ms")
_GROUPS = ("correct", "wrong")
# CPU runs use the `small` preset and a short timing budget: the suite checks verdicts, not speed.
_CPU_TIMING_BUDGET_S = 1.0
_DEFAULT_TIMEOUT_S = 180.0  # covers one cold load_inline build (~30 s CPU, ~60 s CUDA) plus the run


@dataclass(frozen=True)
class Expectation:
    status: str
    rule: str = ""

    def __str__(self) -> str:
        return f"{self.status} {self.rule}".strip()


@dataclass(frozen=True)
class Fixture:
    path: Path
    problem_dir: str  # the folder name, e.g. gelu_tanh
    group: str  # correct | wrong
    name: str
    backend: str
    expect: tuple[Expectation, ...]
    static: bool = True
    timeout_s: float | None = None
    requires_gpu: bool = False
    warns: tuple[str, ...] = ()
    min_ms: float | None = None  # an ok verdict timed at least this slow
    requires_cpus: bool = False  # shows only where this process may use two CPUs

    @property
    def id(self) -> str:
        return f"{self.problem_dir}/{self.group}/{self.name}.{self.backend}"

    @property
    def expected(self) -> str:
        return " | ".join(str(e) for e in self.expect)


@dataclass(frozen=True)
class FixtureOutcome:
    fixture: Fixture
    status: str
    rule: str
    passed: bool
    seconds: float
    message: str = ""

    @property
    def got(self) -> str:
        return f"{self.status} {self.rule}".strip()


def fixture_root() -> Path:
    return Path(str(resources.files("kbench.selftest") / "fixtures"))


def parse_header(text: str, where: str) -> dict[str, str]:
    """The `# key: value` lines at the top of a fixture (free-text comment lines are ignored)."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        key, sep, value = line[1:].partition(":")
        if sep and key.strip() in _KEYS:
            found[key.strip()] = value.strip()
    if "expect" not in found:
        raise ConfigError(f"{where}: fixture has no '# expect: STATUS [RULE]' header")
    return found


def fixture_text(path: Path) -> str:
    """A fixture's candidate source: its own text, after the text of the file its `# include: FILE` header
    names (beside it, in the same folder)."""
    text = path.read_text()
    include = parse_header(text, str(path)).get("include")
    if not include:
        return text
    shared = path.parent / include
    if shared.parent != path.parent or not shared.is_file():
        raise ConfigError(f"{path}: '# include: {include}' names no file beside it")
    return shared.read_text() + "\n" + text


def expectations(spec: str) -> tuple[Expectation, ...]:
    """An `# expect:` header's alternatives (`STATUS [RULE] | ...`)."""
    out = []
    for alt in spec.split("|"):
        parts = alt.split()
        out.append(Expectation(parts[0], parts[1] if len(parts) > 1 else ""))
    return tuple(out)


def load_fixture(path: Path) -> Fixture:
    stem, backend = _name_parts(path)
    head = parse_header(path.read_text(), str(path))
    return Fixture(
        path=path,
        problem_dir=path.parent.parent.name,
        group=path.parent.name,
        name=stem,
        backend=backend,
        expect=expectations(head["expect"]),
        static=head.get("static", "on") != "off",
        timeout_s=float(head["timeout"]) if "timeout" in head else None,
        requires_gpu=get_backend(backend).needs_gpu or head.get("requires") == "gpu",
        warns=tuple(head["warns"].split()) if "warns" in head else (),
        min_ms=float(head["min-ms"]) if "min-ms" in head else None,
        requires_cpus=head.get("requires") == "cpus",
    )


def _name_parts(path: Path) -> tuple[str, str]:
    """A fixture file's name and backend: `honest.cuda.py` is (honest, cuda)."""
    stem, _, backend = path.name.removesuffix(".py").rpartition(".")
    return stem, backend


def fixture_backend(path: Path) -> str:
    """The backend a fixture file is for: the last part of its name (`honest.cuda.py`: cuda)."""
    return _name_parts(path)[1]


def missing_backends(root: Path | None = None) -> dict[str, str]:
    """The backends some fixture is for that cannot run here, and why: not registered (a plugin whose
    package is not installed), or its tool missing (`Backend.version()` is None: its extra not installed)."""
    from kbench.backends import backend_names

    missing = {}
    for backend in sorted({fixture_backend(p) for p in (root or fixture_root()).glob("*/*/*.py")}):
        if backend not in backend_names():
            missing[backend] = "no such backend is registered here"
        elif (b := get_backend(backend)).version() is None:
            try:  # its own check names the fix (an extra to install, a compiler to put on PATH)
                b.check_environment("cuda" if b.needs_gpu else "cpu")
                missing[backend] = "its tools are not installed"
            except ConfigError as exc:
                missing[backend] = str(exc)
        else:  # installed: but a package that does not import here (made for another torch) cannot run
            try:
                b.check_environment("cuda" if b.needs_gpu else "cpu")
            except MissingExtraError as exc:
                missing[backend] = str(exc)
            except ConfigError:  # another reason (no GPU here): the fixtures' own discovery decides
                pass
    return missing


def gpu_only(backends: Iterable[str] | None = None, root: Path | None = None) -> dict[str, int]:
    """How many fixtures of each backend only a GPU runs (`discover` leaves them out on the CPU)."""
    counts: dict[str, int] = {}
    for fx in discover(root, backends, gpu=True):
        if fx.requires_gpu:
            counts[fx.backend] = counts.get(fx.backend, 0) + 1
    return counts


def discover(
    root: Path | None = None, backends: Iterable[str] | None = None, gpu: bool = False
) -> list[Fixture]:
    """Fixtures under `root`, honest controls first (they warm the shared build cache). Without `backends`,
    those of every backend that can run here (`missing_backends` says which cannot, and why); a backend
    named in `backends` is taken whatever, so that its evaluation says what it lacks."""
    root = root or fixture_root()
    wanted = set(backends) if backends else None
    skipped = set() if wanted is not None else set(missing_backends(root))
    fixtures = []
    for group in _GROUPS:
        for path in sorted(root.glob(f"*/{group}/*.py")):
            backend = fixture_backend(path)
            if (wanted is not None and backend not in wanted) or backend in skipped:
                continue
            fx = load_fixture(path)
            if gpu or not fx.requires_gpu:
                if fx.requires_cpus and len(os.sched_getaffinity(0)) < 2:
                    continue  # one CPU: a second core's use cannot be shown here
                fixtures.append(fx)
    return fixtures


def fixture_problem(fixture: Fixture) -> Problem:
    from kbench.problems.sources import load_source

    return load_source(str(fixture.path.parent.parent / "problem.py"))[0]


def fixture_config(fixture: Fixture, gpu: bool, base: RunConfig | None = None) -> RunConfig:
    """The run config for one fixture: cpp always on the CPU; GPU runs use the full preset."""
    base = base or RunConfig()
    on_gpu = gpu and get_backend(fixture.backend).gpu_kernels
    update = {
        "backend": fixture.backend,
        "device": "cuda" if on_gpu else "cpu",
        "preset": "full" if on_gpu else "small",
        "static_checks": fixture.static,
        "timeout_s": fixture.timeout_s or _DEFAULT_TIMEOUT_S,
        "baselines": ["eager"],
    }
    if not on_gpu:
        update["timing_budget_s"] = min(base.timing_budget_s, _CPU_TIMING_BUDGET_S)
    return base.model_copy(update=update)


def caught_as_expected(fixture: Fixture, verdict: Verdict) -> bool:
    """True when the verdict is one of the expected ones and carries every expected warning."""
    status, rule = verdict.status.value, verdict.rule
    if not any(e.status == status and (not e.rule or e.rule == rule) for e in fixture.expect):
        return False
    warned = {f"static:{f.rule}" for f in verdict.checks.findings} | set(verdict.warnings)
    if fixture.min_ms is not None and status == "ok":
        if verdict.timing is None or verdict.timing.median_ms < fixture.min_ms:
            return False
    return all(w in warned for w in fixture.warns)


class Judges:
    """The engine every fixture is judged by: one `Evaluator` (the engine of `kbench run`, the service and
    the library) per fixture config -- backend, device and preset, static checks on or off -- opened on
    first use and kept until `close()`, so a problem's fixtures share its reference run (with `share`)
    and builds run ahead on the Evaluator's builders. A fixture's own `timeout` rides on its submission."""

    def __init__(self, gpu: bool = False, base: RunConfig | None = None, share: bool = True) -> None:
        self.gpu, self.base, self.share = gpu, base, share
        self._open: dict[str, Evaluator] = {}

    def evaluator(self, fixture: Fixture) -> Evaluator:
        from kbench.api import Evaluator, EvaluatorOptions

        cfg = fixture_config(fixture, self.gpu, self.base)
        # hermetic: every fixture's baselines are timed here, none taken from the user's store
        cfg = cfg.model_copy(
            update={"timeout_s": max(cfg.timeout_s, _DEFAULT_TIMEOUT_S), "reuse_baselines": False}
        )
        key = cfg.model_dump_json()
        if key not in self._open:
            options = EvaluatorOptions(record=False, share_references=self.share)
            self._open[key] = Evaluator(cfg, options)
        return self._open[key]

    def judge(self, fixtures: Iterable[Fixture]) -> list[FixtureOutcome]:
        """Each fixture's outcome, in the order given; all are queued before the first verdict is read."""
        tickets = [(f, self.evaluator(f).submit(submission(f))) for f in fixtures]
        return [_outcome(f, ticket.verdict()) for f, ticket in tickets]

    def close(self) -> None:
        for evaluator in self._open.values():
            evaluator.close()
        self._open.clear()

    def __enter__(self) -> Judges:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def submission(fixture: Fixture) -> Submission:
    """The fixture as the engine takes it: its problem, its text (with what it includes), its backend and
    its own timeout."""
    from kbench.api import Submission

    source = fixture_text(fixture.path)
    return Submission(fixture_problem(fixture), source, fixture.backend, timeout_s=fixture.timeout_s)


def _outcome(fixture: Fixture, verdict: Verdict) -> FixtureOutcome:
    return FixtureOutcome(
        fixture,
        verdict.status.value,
        verdict.rule,
        caught_as_expected(fixture, verdict),
        verdict.seconds,
        verdict.message,
    )


def run_suite(
    backends: Iterable[str] | None = None,
    gpu: bool = False,
    select: str = "",
    base: RunConfig | None = None,
    share: bool = True,
) -> list[FixtureOutcome]:
    """Every fixture's verdict. `share`: the fixtures of one problem share its reference run (a run's
    warm path); off, each runs its own, the path of `kbench eval` and of a problem a batch evaluates once
    (on a GPU the candidate's worker then starts beside the reference's, its outputs kept on the device)."""
    fixtures = [f for f in discover(backends=backends, gpu=gpu) if select in f.id]
    with Judges(gpu, base, share) as judges:
        return judges.judge(fixtures)
