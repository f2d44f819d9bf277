"""The reference worker and its disk cache: fixed seeds cached, secret seeds recomputed every run."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest
import torch
from evalfixtures import cpu_config

from kbench.evaluate.plan import make_plan
from kbench.evaluate.reference_cache import cache_key, read_cache, wait_for_cache, write_cache
from kbench.evaluate.reference_run import get_reference
from kbench.problems import build_model, get_problem, load
from kbench.sandbox.protocol import JobSpec, WorkerResult
from kbench.sandbox.tensorfiles import load_tensors, save_tensors
from kbench.types import Problem, TimingStats


def test_reference_outputs_and_cache(tmp_path: Path) -> None:
    problem = get_problem("kbench:2/1")
    cfg = cpu_config(tmp_path, measure=True, timing_budget_s=0.2)
    plan = make_plan(cfg, "cpu")
    first = get_reference(problem, cfg, plan, tmp_path / "a")
    assert not first.cache_hit and set(first.outputs) == set(plan.fixed + plan.secret + plan.timing)
    assert "eager" in first.timings and first.timings["eager"].n >= 20

    loaded = load(problem, "small")
    model = build_model(loaded, cfg.init_seed)
    torch.manual_seed(plan.fixed[0])
    (x,) = loaded.get_inputs()
    assert torch.equal(first.outputs[plan.fixed[0]][0], model(x))

    plan2 = make_plan(cfg, "cpu")
    second = get_reference(problem, cfg, plan2, tmp_path / "b")
    assert second.cache_hit and plan2.secret[0] in second.outputs
    assert torch.equal(second.outputs[plan.fixed[0]][0], first.outputs[plan.fixed[0]][0])
    assert second.timings == first.timings


def test_cache_key_depends_on_dtype_and_device() -> None:
    spec = JobSpec(
        role="reference",
        problem=Problem(source="s", level=1, number=1, name="n", code="x"),
        preset="full",
        dtype="fp32",
        device="cpu",
    )
    key = cache_key(spec, "2.13", "cpu")
    assert key == cache_key(spec, "2.13", "cpu")
    assert key != cache_key(spec.model_copy(update={"dtype": "bf16"}), "2.13", "cpu")
    assert key != cache_key(spec, "2.13", "NVIDIA H200")
    assert key != cache_key(spec, "2.14", "cpu")


def _one_output(jobdir: Path) -> WorkerResult:
    jobdir.mkdir()
    result = WorkerResult(timings={"eager": TimingStats(1.0, 1.0, 0.0, 0.0, 1.0, 1, 0.0)})
    result.outputs["1000"] = save_tensors(jobdir, "out_1000", [torch.arange(1000.0)])
    result.input_checksums["1000"] = ["abc"]
    return result


def test_cache_write_outlives_its_job_folder(tmp_path: Path) -> None:
    jobdir, folder = tmp_path / "job", tmp_path / "cache" / "reference" / "key"
    result = _one_output(jobdir)
    write_cache(folder, jobdir, result, [1000])
    shutil.rmtree(jobdir)  # the evaluation ends and its job folder goes while the copy may still run
    cached = read_cache(folder)  # waits for this process's pending write of the folder
    assert cached is not None and cached.timings == result.timings
    (got,) = load_tensors(folder, cached.outputs["1000"])
    assert torch.equal(got, torch.arange(1000.0))


def test_a_file_changed_after_signing_is_never_cached(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The host may take the reference's outputs on the device and never read their files: the cache copy
    itself is checked against the signed digest, so a candidate that rewrote them poisons no later run."""
    jobdir, folder = tmp_path / "job", tmp_path / "cache" / "reference" / "key"
    result = _one_output(jobdir)
    (name,) = [f.name for f in result.outputs["1000"]]
    (jobdir / name).write_bytes(torch.zeros(1000).numpy().tobytes())  # same size, other bytes
    with caplog.at_level(logging.WARNING, logger="kbench.evaluate.reference_cache"):
        write_cache(folder, jobdir, result, [1000])
        wait_for_cache()
    assert read_cache(folder) is None and not folder.exists()
    assert any("changed after the reference signed it" in r.getMessage() for r in caplog.records)


def test_outputs_also_delivered_on_the_device_are_cached_as_files(tmp_path: Path) -> None:
    """A fixed seed's output the reference both delivered and wrote is a plain file entry in the cache, so
    a later run reads it and offers its candidate a buffer of its layout."""
    from kbench.evaluate.device_outputs import layouts

    jobdir, folder = tmp_path / "job", tmp_path / "cache" / "reference" / "key"
    result = _one_output(jobdir)
    result.outputs["1000"] = [f.model_copy(update={"received": True}) for f in result.outputs["1000"]]
    write_cache(folder, jobdir, result, [1000])
    cached = read_cache(folder)
    assert cached is not None and not any(f.received for f in cached.outputs["1000"])
    assert layouts(cached.outputs, [1000]) == {1000: [("float32", [1000])]}
    (got,) = load_tensors(folder, cached.outputs["1000"])
    assert torch.equal(got, torch.arange(1000.0))


def test_a_failed_cache_write_is_logged_and_leaves_no_entry(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    jobdir = tmp_path / "job"
    result = _one_output(jobdir)
    (tmp_path / "not-a-dir").write_text("")
    folder = tmp_path / "not-a-dir" / "key"  # its parent cannot be made
    with caplog.at_level(logging.WARNING, logger="kbench.evaluate.reference_cache"):
        write_cache(folder, jobdir, result, [1000])
        wait_for_cache()
    assert read_cache(folder) is None
    assert any("not written" in r.getMessage() for r in caplog.records)


def test_a_write_killed_mid_copy_leaves_nothing_for_the_next_write(tmp_path: Path) -> None:
    """A process killed while copying leaves its temporary folder; the next write removes it (its writer is
    dead), never a live writer's, nor a folder whose writer it cannot tell."""
    import subprocess
    import sys

    from kbench.evaluate.reference_cache import TMP_PREFIX
    from kbench.sandbox.procs import ProcRef, self_ref

    parent = tmp_path / "cache" / "reference"
    parent.mkdir(parents=True)
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    dead = ProcRef.of(int(gone.stdout)) or ProcRef(int(gone.stdout), 1)  # exited: /proc has it no more
    stale = parent / f"{TMP_PREFIX}{dead}-abc123"
    (stale / "out_1000_0.bin").parent.mkdir()
    (stale / "out_1000_0.bin").write_bytes(b"\0" * 4096)
    live = parent / f"{TMP_PREFIX}{self_ref()}-def456"  # a write in progress in a running process
    old = parent / f"{TMP_PREFIX}k3j2h1"  # an older kbench's name: its writer cannot be told
    live.mkdir()
    old.mkdir()
    jobdir = tmp_path / "job"
    write_cache(parent / "key", jobdir, _one_output(jobdir), [1000])
    wait_for_cache()
    assert not stale.exists() and live.exists() and old.exists()
    assert read_cache(parent / "key") is not None
    assert sorted(p.name for p in parent.iterdir() if p.name.startswith(TMP_PREFIX)) == sorted(
        [live.name, old.name]
    )


@pytest.mark.slow
def test_reference_compiles_its_baseline_in_the_trusted_caches(tmp_path: Path) -> None:
    """torch.compile's caches for the baseline lie in cache_dir/trusted, not in the temporary or Triton
    folders a candidate's worker may write (a planted kernel there would slow the baseline)."""
    from kbench.evaluate.prebuild import reference_env, worker_env

    cfg = cpu_config(tmp_path / "cache", measure=True, timing_budget_s=0.1, baselines=["eager", "compile"])
    env = reference_env(cfg, "cpu")
    trusted = (tmp_path / "cache" / "trusted").absolute()
    assert env["TORCHINDUCTOR_CACHE_DIR"] == str(trusted / "inductor")
    assert env["TRITON_CACHE_DIR"] == str(trusted / "triton")
    assert "TORCHINDUCTOR_CACHE_DIR" not in worker_env("cpp", cfg, "cpu")  # candidates keep the defaults
    ref = get_reference(get_problem("kbench:2/23"), cfg, make_plan(cfg, "cpu"), tmp_path / "work")
    assert "compile" in ref.timings
    assert any((trusted / "inductor").rglob("*")), "the compile baseline wrote no Inductor cache there"
