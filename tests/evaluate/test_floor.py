"""The speed-of-light floor's counts, counted in a process forked from the warm starter (evaluate/floor.py)."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

import pytest
from evalfixtures import cpu_config

from kbench.analysis import roofline
from kbench.analysis.gpus import match_device_name
from kbench.evaluate import floor
from kbench.problems import get_problem
from kbench.sandbox import starter


@pytest.fixture(autouse=True)
def _own_starters():
    yield
    starter.kill_all()


def kept(problem, cfg, folder: Path):
    return roofline.kept_counts(roofline.counts_path(problem, cfg.preset, cfg.dtype, folder))


def test_counts_in_a_forked_process_match_the_hosts_own(tmp_path: Path) -> None:
    problem = get_problem("2/1")
    cfg = cpu_config(tmp_path, worker_start="fork")
    folder = tmp_path / "flops"
    roofline._cached_counts.cache_clear()
    assert floor.count_beside(problem, cfg, "cpu", folder)
    # counted elsewhere: this process traced nothing, and the kept counts are the count's own
    assert roofline._cached_counts.cache_info().currsize == 0
    assert kept(problem, cfg, folder) == roofline.problem_flops(problem, cfg.preset, cfg.dtype)


def test_kept_counts_start_no_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    problem = get_problem("2/1")
    cfg = cpu_config(tmp_path, worker_start="fork")
    folder = tmp_path / "flops"
    roofline.disk_counts(problem, cfg.preset, cfg.dtype, folder)

    def no_start(*args: object) -> None:
        raise AssertionError("a process was started for counts already kept")

    monkeypatch.setattr(starter, "start_worker", no_start)
    assert floor.count_beside(problem, cfg, "cpu", folder)


def test_spawned_workers_leave_the_count_to_the_host(tmp_path: Path) -> None:
    problem = get_problem("2/1")
    cfg = cpu_config(tmp_path, worker_start="spawn")
    folder = tmp_path / "flops"
    assert not floor.count_beside(problem, cfg, "cpu", folder)
    assert kept(problem, cfg, folder) is None


def test_a_failed_count_is_logged_and_left_to_the_host(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    good = get_problem("2/1")
    broken = replace(good, code=good.code + "\nraise RuntimeError('no model here')\n")
    cfg = cpu_config(tmp_path, worker_start="fork")
    folder = tmp_path / "flops"
    with caplog.at_level(logging.WARNING, logger="kbench.evaluate.floor"):
        assert not floor.count_beside(broken, cfg, "cpu", folder)
    assert "no model here" in caplog.text
    assert kept(broken, cfg, folder) is None


def test_sol_ms_reads_the_count_kept_beside(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    problem = get_problem("2/1")
    cfg = cpu_config(tmp_path, worker_start="fork")
    monkeypatch.setattr(floor, "device_name", lambda device: "NVIDIA H200")
    roofline._cached_counts.cache_clear()
    got = floor.sol_ms(problem, cfg, "cuda:0")
    assert roofline._cached_counts.cache_info().currsize == 0
    gpu = match_device_name("NVIDIA H200")
    assert gpu is not None
    direct = roofline.sol_from_counts(
        roofline.problem_flops(problem, cfg.preset, cfg.dtype), gpu, cfg.dtype, True
    )
    assert got == pytest.approx(direct.floor_ms) and got > 0
    assert floor.sol_ms(problem, cfg, "cpu") is None
