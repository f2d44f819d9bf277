"""The speed-of-light floor's counts, counted in a process forked from the warm starter (evaluate/floor.py)."""

from __future__ import annotations

import logging
import subprocess
import sys
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
    got = floor.count_beside(problem, cfg, "cpu", folder)
    # counted elsewhere: this process traced nothing, and the kept counts are the count's own
    assert roofline._cached_counts.cache_info().currsize == 0
    assert got == kept(problem, cfg, folder) == roofline.problem_flops(problem, cfg.preset, cfg.dtype)


def test_kept_counts_start_no_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    problem = get_problem("2/1")
    cfg = cpu_config(tmp_path, worker_start="fork")
    folder = tmp_path / "flops"
    roofline.disk_counts(problem, cfg.preset, cfg.dtype, folder)

    def no_start(*args: object) -> None:
        raise AssertionError("a process was started for counts already kept")

    monkeypatch.setattr(starter, "start_worker", no_start)
    assert floor.count_beside(problem, cfg, "cpu", folder) == kept(problem, cfg, folder) is not None


def test_spawned_workers_leave_the_count_to_the_host(tmp_path: Path) -> None:
    problem = get_problem("2/1")
    cfg = cpu_config(tmp_path, worker_start="spawn")
    folder = tmp_path / "flops"
    assert floor.count_beside(problem, cfg, "cpu", folder) is None
    assert kept(problem, cfg, folder) is None


def test_a_failed_count_is_logged_and_left_to_the_host(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    good = get_problem("2/1")
    broken = replace(good, code=good.code + "\nraise RuntimeError('no model here')\n")
    cfg = cpu_config(tmp_path, worker_start="fork")
    folder = tmp_path / "flops"
    with caplog.at_level(logging.WARNING, logger="kbench.evaluate.floor"):
        assert floor.count_beside(broken, cfg, "cpu", folder) is None
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
    sol = floor.speed_of_light(problem, cfg, "cuda:0")  # what a verdict keeps as its sol_ms
    assert sol is not None and sol.sol_ms == pytest.approx(direct.sol_ms) and sol.sol_ms >= got


def test_the_count_keeps_triton_out_and_counts_the_same(tmp_path: Path) -> None:
    """The counts worker refuses Triton (its library took 0.4-0.6 s of a first count) unless it is
    loaded already; the counts of a PyTorch reference are the same without it."""
    script = (
        "import sys, torch\n"
        "from kbench.worker.counts import refuse_triton\n"
        "refuse_triton()\n"
        "from kbench.analysis.roofline import problem_flops\n"
        "from kbench.problems import get_problem\n"
        "import torch.utils.flop_counter as fc\n"
        "counts = problem_flops(get_problem('2/17'), 'small', 'fp32')\n"
        "print(fc._JITFunction is type(None), sys.modules['triton'] is None, counts.flops, counts.bytes)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=True
    )
    refused, gone, flops, nbytes = out.stdout.split()
    assert refused == "True" and gone == "True"
    here = roofline.problem_flops(get_problem("2/17"), "small", "fp32")
    assert (int(flops), int(nbytes)) == (here.flops, here.bytes)


def test_a_count_ended_by_a_stop_is_not_done_again_in_the_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stop signal ends the starters and so the count's process: the host does not count instead (the
    evaluation is being stopped), and the floor is simply absent."""
    cfg = cpu_config(tmp_path, worker_start="fork")
    monkeypatch.setattr(floor, "device_name", lambda device: "NVIDIA H200")
    monkeypatch.setattr(floor, "count_beside", lambda *args: None)
    monkeypatch.setattr(floor, "stopping", lambda: True)

    def no_count(*args: object) -> None:
        raise AssertionError("the host counted while stopping")

    monkeypatch.setattr(roofline, "problem_flops", no_count)
    roofline._cached_counts.cache_clear()
    assert floor.sol_ms(get_problem("2/1"), cfg, "cuda:0") is None
