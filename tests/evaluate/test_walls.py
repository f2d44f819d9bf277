"""Two candidates, one cache: an attacker that tries every wall (the build cache, other jobs' files, the
host's secrets, other processes, a process left behind) cannot change a victim's verdict or the binary it
is timed with, and what got through is nothing (docs/anti-cheat.md, "Walls").
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
from pathlib import Path

import pytest
from evalfixtures import cpu_config, fixture_source

from kbench.evaluate.flow import evaluate
from kbench.problems import get_problem
from kbench.referee.builds import STAGING
from kbench.sandbox import procs
from kbench.types import Candidate, Status, Verdict

PROBLEM = "kbench:2/1"
SECRET = "sk-kbench-walls-test-0123456789"
MARKER = "kbench-walls-leftover"


def _evaluate(source: str, cache_dir: Path, **kw: object) -> Verdict:
    problem = get_problem(PROBLEM)
    cfg = cpu_config(cache_dir, timing_budget_s=1.0, **kw)
    return evaluate(problem, Candidate(problem.key, "cpp", source), cfg)


def _files(folder: Path) -> dict[str, str]:
    """Each file's digest, but for builds in progress (`.staging`): another worker's compiler writes there
    meanwhile, and nothing there is loaded until it is sealed and renamed into the cache."""
    found = {}
    for root, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if d != STAGING]  # not walked into: it may be renamed meanwhile
        for name in files:
            path = Path(root, name)
            if not path.is_symlink():
                found[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return dict(sorted(found.items()))


def _attacker(targets: list[str], reads: list[str]) -> str:
    source = fixture_source("attack_walls.py")
    source = source.replace("TARGETS: list[str] = []", f"TARGETS: list[str] = {targets!r}")
    return source.replace("READS: list[str] = []", f"READS: list[str] = {reads!r}")


def _report(verdict: Verdict) -> dict[str, str]:
    line = next((x for x in verdict.log_tail.splitlines() if x.startswith("WALLS ")), None)
    assert line is not None, verdict.message + verdict.log_tail
    return dict(re.findall(r"(\w+)=(\[.*?\]|\d+)", line))


def _leftovers() -> list[int]:
    found = []
    for pid in procs.all_pids():
        try:
            if MARKER.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(pid)
        except OSError:
            continue
    return found


@pytest.mark.slow
def test_an_attacker_changes_nothing_of_a_victims_verdict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shared_builds: Path
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("KBENCH_SERVICE_TOKEN", SECRET)
    cache = _own_copy_of_the_honest_build(tmp_path / "cache", shared_builds, headers=False)
    before = _evaluate(fixture_source("cpp_honest.py"), cache)
    assert before.status is Status.OK, before.message + before.log_tail
    cached = _files(cache)
    builds = [p for p in cached if "/builds/" in p]
    assert builds, "the victim's build is in the cache"
    reads = [p for p in cached if "/reference/" in p] + builds[:3]

    attack = _evaluate(_attacker(builds, reads), cache)
    try:
        report = _report(attack)
        assert report["wrote"] == "[]"
        assert report["read"] == "[]"
        assert SECRET not in attack.log_tail and SECRET not in attack.message
        if "pid" in attack.confinement:
            assert int(report["pids"]) <= 3, attack.confinement  # its own namespace: itself and its init
        assert (attack.status, attack.rule) == (Status.CHEAT, "child-process"), attack.message
        assert _leftovers() == []
    finally:
        for pid in _leftovers():
            os.kill(pid, signal.SIGKILL)

    assert {p: d for p, d in _files(cache).items() if p in cached} == cached
    after = _evaluate(fixture_source("cpp_honest.py"), cache)
    assert after.status is Status.OK, after.message + after.log_tail
    _same_binary(after, cache, {p: d for p, d in cached.items() if "/builds/" in p})


def _same_binary(after: Verdict, builds: Path, built: dict[str, str]) -> None:
    """A planted header or binary changes the victim's speed only through the bytes it loads: the victim's
    second verdict is a cache hit of the very files its first build left (each verified by digest when
    loaded), so it ran the same machine code in the same loop. Asserted on the bytes, not on a timing,
    which moves several-fold on a loaded 2-core machine by itself."""
    assert after.timing is not None and after.build is not None and after.build.cache_hit, after.message
    assert built and {p: d for p, d in _files(builds).items() if p in built} == built


def test_a_shell_in_build_flags_changes_nothing_of_a_victims_build(
    tmp_path: Path, shared_builds: Path
) -> None:
    """torch writes load_inline's flags into ninja's command lines unquoted: an attacker whose link flags
    hold `; command` would run that command in the builder, beside the precompiled headers every build
    with its flags shares. Refused before anything runs: the shared builds stay byte for byte what they
    were, and the victim's verdict and the binary it is timed with."""
    from evalfixtures import use_builds

    cache = use_builds(tmp_path / "cache", shared_builds)
    marker = tmp_path / "flag-attack-ran"
    before = _evaluate(fixture_source("cpp_honest.py"), cache)
    assert before.status is Status.OK and before.build is not None and before.build.cache_hit, before.message
    shared = _files(shared_builds)
    injected = [
        ";",
        "touch",
        str(marker),
        ";",
        "cp",
        "/dev/null",
        "../.pch/torch/extension.h.gch",
        ";",
        "true",
    ]
    attacker = (
        fixture_source("cpp_honest.py")
        .replace('name="kbench_fixture_gemm_relu"', 'name="kbench_fixture_flag_attack"')
        .replace('extra_ldflags=["-fopenmp"]', f"extra_ldflags={injected!r}")
    )
    assert attacker.count("flag_attack") == 1 and str(marker) in attacker
    attack = _evaluate(attacker, cache)
    assert attack.status is Status.BUILD_ERROR and "not one plain flag" in attack.message, attack.message
    assert not marker.exists()
    assert {p: d for p, d in _files(shared_builds).items() if p in shared} == shared
    after = _evaluate(fixture_source("cpp_honest.py"), cache)
    assert after.status is Status.OK, after.message + after.log_tail
    _same_binary(after, shared_builds, shared)


def _own_copy_of_the_honest_build(cache: Path, shared_builds: Path, headers: bool = True) -> Path:
    """`cache`, its build folder a copy of the session's build of the honest fixture (found built: the
    test compiles it once or not at all) and, with `headers`, of the session's precompiled headers with
    the lite-header shims they were made of (a rebuild compiles against them: a header is used only where
    its link leads to a shim of the same cache). The 0.5 GB header is hard-linked, not copied; nothing
    here writes it."""
    builds = cache / "builds"
    builds.mkdir(parents=True)
    session = shared_builds.resolve()
    for made in (shared_builds / ".pch").iterdir() if headers else ():
        header = Path(os.path.realpath(made / "torch" / "extension.h"))  # a lite-header shim's, if ready
        if not (made / "torch" / "extension.h.gch").is_file() or not header.is_relative_to(session):
            continue  # one being made (other workers build beside this test), or torch's own header
        shim = header.relative_to(session).parents[1]  # .shim/DIGEST: sealed, never changed
        if not (builds / shim).exists():
            shutil.copytree(session / shim, builds / shim, symlinks=True)
        copy = builds / ".pch" / made.name
        shutil.copytree(made, copy, symlinks=True, copy_function=os.link)
        (copy / "torch" / "extension.h").unlink()
        (copy / "torch" / "extension.h").symlink_to(builds / header.relative_to(session))
    for folder in shared_builds.iterdir():
        if folder.is_dir() and (folder / "kbench_fixture_gemm_relu.so").is_file():
            shutil.copytree(folder, builds / folder.name, symlinks=True)
    return cache


def test_a_changed_cached_binary_is_never_loaded(tmp_path: Path, shared_builds: Path) -> None:
    """The second wall, should the first fail: a cached build is loaded only when every file matches
    the digest its builder recorded; a changed one is rebuilt, and the verdict is the honest one."""
    cache = tmp_path / "cache"
    _own_copy_of_the_honest_build(cache, shared_builds)
    first = _evaluate(fixture_source("cpp_honest.py"), cache, measure=False)
    assert first.status is Status.OK, first.message + first.log_tail
    binaries = [p for p in (cache / "builds").rglob("*.so") if p.is_file()]
    assert binaries
    for so in binaries:
        so.write_bytes(b"\x7fELF" + b"\0" * 64)
    again = _evaluate(fixture_source("cpp_honest.py"), cache, measure=False)
    assert again.status is Status.OK, again.message + again.log_tail
    for so in binaries:  # rebuilt (by the job's build step), not loaded as found
        assert so.read_bytes() != b"\x7fELF" + b"\0" * 64


def test_the_timing_calibration_is_out_of_the_candidates_reach(tmp_path: Path, shared_builds: Path) -> None:
    """The deduction every timed batch gets is measured before the candidate is imported: a candidate
    whose import makes the runner slow to answer batches of no calls (the calibration's) changes nothing
    of it, so its calls are not timed as faster (the deduction, not a timing ratio a loaded machine moves,
    is what the test reads)."""
    from evalfixtures import use_builds

    cache = use_builds(tmp_path / "cache", shared_builds)
    slowed = fixture_source("cpp_honest.py") + (
        "\nimport time as _time\nimport kbench.worker.runner as _runner\n_run = _runner.Server.run\n\n\n"
        "def _slow(self, cmd):\n    if not cmd.inputs:\n        _time.sleep(0.05)\n    return _run(self, cmd)\n\n\n"
        "_runner.Server.run = _slow\n"
    )
    attacked = _evaluate(slowed, cache)
    assert attacked.status is Status.OK, attacked.message
    assert attacked.timing is not None and attacked.timing.loop is not None
    overhead = attacked.timing.loop.overhead_ms
    # a 50 ms sleep per calibration batch would show in every one; 0 is a window no longer than the
    # referee's own measure of the same work (calibrate.py keeps the least, at least 0: a loaded machine)
    assert 0.0 <= overhead < 25.0, overhead
