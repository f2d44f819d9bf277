"""The fixture suite's own plumbing: headers, discovery and judging (no evaluator run)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbench.errors import ConfigError
from kbench.selftest.runner import caught_as_expected, discover, fixture_config, fixture_root, load_fixture
from kbench.types import CheckReport, Finding, Severity, Status, Verdict


def _verdict(status: Status, rule: str = "", findings: tuple[Finding, ...] = ()) -> Verdict:
    return Verdict(status, "p", "cpp", "small", "fp32", "cpu", rule=rule, checks=CheckReport(findings))


def _write(tmp_path: Path, header: str, name: str = "x.cpp.py") -> Path:
    folder = tmp_path / "prob" / "wrong"
    folder.mkdir(parents=True)
    path = folder / name
    path.write_text(header + "import torch\n")
    return path


def test_every_problem_folder_has_a_problem_and_both_groups():
    for folder in (p for p in fixture_root().iterdir() if p.is_dir() and not p.name.startswith("_")):
        assert (folder / "problem.py").is_file()
        assert any((folder / "correct").glob("*.py")) and any((folder / "wrong").glob("*.py"))


def test_discovery_skips_gpu_fixtures_without_gpu_and_orders_controls_first():
    cpu = discover(gpu=False)
    assert cpu and not any(f.requires_gpu for f in cpu)
    groups = [f.group for f in cpu]
    assert groups == sorted(groups)  # correct < wrong
    assert {f.backend for f in discover(gpu=True)} >= {"cpp", "cuda", "triton"}


def test_header_alternatives_static_and_timeout(tmp_path: Path):
    path = _write(tmp_path, "# expect: cheat a | mismatch\n# static: off\n# timeout: 12\n# note: free text\n")
    fx = load_fixture(path)
    assert [str(e) for e in fx.expect] == ["cheat a", "mismatch"]
    assert not fx.static and fx.timeout_s == 12.0 and fx.backend == "cpp" and fx.name == "x"
    cfg = fixture_config(fx, gpu=False)
    assert (cfg.device, cfg.preset, cfg.static_checks, cfg.timeout_s) == ("cpu", "small", False, 12.0)


def test_missing_expect_header_is_our_error(tmp_path: Path):
    with pytest.raises(ConfigError, match="expect"):
        load_fixture(_write(tmp_path, "# just a comment\n"))


def test_judge_needs_status_rule_and_warnings(tmp_path: Path):
    fx = load_fixture(
        _write(tmp_path, "# expect: cheat inputs-mutated | mismatch\n# warns: static:streams\n")
    )
    warn = (Finding("streams", Severity.WARN, "side stream"),)
    assert caught_as_expected(fx, _verdict(Status.CHEAT, "inputs-mutated", warn))
    assert caught_as_expected(fx, _verdict(Status.MISMATCH, "", warn))
    assert not caught_as_expected(fx, _verdict(Status.CHEAT, "inputs-mutated"))  # warning missing
    assert not caught_as_expected(fx, _verdict(Status.CHEAT, "global-state", warn))
    assert not caught_as_expected(fx, _verdict(Status.OK, "", warn))


@pytest.mark.parametrize(("flag", "shared"), [([], True), (["--no-share"], False)])
def test_selftest_judges_through_evaluators_sharing_reference_runs_unless_told_not_to(
    monkeypatch: pytest.MonkeyPatch, flag: list[str], shared: bool
):
    """`kbench selftest` is a client of the engine: one Evaluator per fixture config (backend, static
    checks on or off), none filing a run, every fixture a submission with its own timeout; `--no-share`
    gives each evaluation its own reference run."""
    from concurrent.futures import Future

    from typer.testing import CliRunner

    import kbench.api
    from kbench.cli import app

    opened: list[tuple[object, object]] = []
    submitted: list[object] = []

    class Ticket:
        def __init__(self, verdict: Verdict) -> None:
            self.future: Future[Verdict] = Future()
            self.future.set_result(verdict)

        def verdict(self) -> Verdict:
            return self.future.result()

    class Evaluator:
        def __init__(self, config, options):  # type: ignore[no-untyped-def]
            opened.append((config, options))

        def submit(self, submission):  # type: ignore[no-untyped-def]
            submitted.append(submission)
            fixture = next(f for f in chosen if f.path.read_text().endswith(submission.source[-200:]))
            expected = fixture.expect[0]
            return Ticket(_verdict(Status(expected.status), expected.rule))

        def close(self) -> None:
            pass

    chosen = [f for f in discover(gpu=False) if "conv2d_relu/" in f.id]
    monkeypatch.setattr(kbench.api, "Evaluator", Evaluator)
    result = CliRunner().invoke(app, ["selftest", "--select", "conv2d_relu/", "--format", "json", *flag])
    assert result.exit_code == 0, result.output
    assert len(submitted) == len(chosen) > 1
    configs = {(f.backend, f.static) for f in chosen}
    assert sorted((c.backend, c.static_checks) for c, _ in opened) == sorted(configs)  # type: ignore[attr-defined]
    assert all(not o.record and o.share_references is shared for _, o in opened)  # type: ignore[attr-defined]
    assert not any(c.reuse_baselines for c, _ in opened)  # type: ignore[attr-defined]
    assert [s.timeout_s for s in submitted] == [f.timeout_s for f in chosen]  # type: ignore[attr-defined]


def test_fixtures_of_a_backend_that_cannot_run_here_are_left_out_and_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fixture for a backend this machine lacks (a plugin not installed, or its tools missing) is left
    out of the suite with the reason, not run to a failure; named with --backend, it is taken anyway."""
    from kbench.backends import get_backend
    from kbench.errors import ConfigError
    from kbench.selftest.runner import discover, gpu_only, missing_backends

    for group in ("correct", "wrong"):
        (tmp_path / "p" / group).mkdir(parents=True)
    (tmp_path / "p" / "correct" / "honest.cpp.py").write_text("# expect: ok\n")
    (tmp_path / "p" / "correct" / "honest.fortran.py").write_text("# expect: ok\n")
    (tmp_path / "p" / "wrong" / "nan.triton.py").write_text("# expect: mismatch\n")
    (tmp_path / "p" / "wrong" / "stale.cpp.py").write_text("# expect: cheat\n# requires: gpu\n")

    def lacks_triton(self: object, device: str) -> None:
        raise ConfigError("triton is not installed: pip install 'kbench[triton]'")

    monkeypatch.setattr(type(get_backend("triton")), "version", lambda self: None)
    monkeypatch.setattr(type(get_backend("triton")), "check_environment", lacks_triton)
    assert missing_backends(tmp_path) == {  # the reason is the backend's own check's, with its fix
        "fortran": "no such backend is registered here",
        "triton": "triton is not installed: pip install 'kbench[triton]'",
    }
    assert [(f.name, f.backend) for f in discover(tmp_path)] == [("honest", "cpp")]
    assert [f.backend for f in discover(tmp_path, backends=["triton"])] == ["triton"]
    # installed (a version) but its package does not import here: left out with why, not run to an error
    from kbench.errors import require

    (tmp_path / "site" / "kb_broken_pkg").mkdir(parents=True)
    (tmp_path / "site" / "kb_broken_pkg" / "__init__.py").write_text("from os import no_such_name\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setattr(type(get_backend("triton")), "version", lambda self: "3.0")
    monkeypatch.setattr(
        type(get_backend("triton")), "check_environment", lambda self, d: require("kb_broken_pkg", "x")
    )
    assert missing_backends(tmp_path)["triton"] == (
        "the optional package 'kb_broken_pkg' is installed but does not import here (ImportError: cannot import "
        "name 'no_such_name' from 'os' (" + __import__("os").__file__ + ")); its version may not match this "
        "torch: install one that does (pip install -U 'kbench[x]')"
    )
    assert gpu_only(root=tmp_path) == {"cpp": 1}  # said on the CPU: left out because it needs a GPU
    assert [f.name for f in discover(tmp_path, gpu=True)] == ["honest", "stale"]
