"""The reference worker and its disk cache: fixed seeds cached, secret seeds recomputed every run."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import pytest
import torch
from evalfixtures import cpu_config

from kbench.evaluate.plan import make_plan
from kbench.evaluate.reference_cache import (
    CREDIT_FILE,
    FLOOR_FILE,
    MIN_SIZE,
    TMP_PREFIX,
    cache_key,
    commit_entry,
    open_entry,
    read_cache,
    sweep_stale,
    touch_entry,
    trim_cache,
)
from kbench.evaluate.reference_run import get_reference
from kbench.problems import build_model, get_problem, load
from kbench.sandbox.protocol import JobSpec, WorkerResult
from kbench.sandbox.tensorfiles import load_tensors, save_tensors
from kbench.types import LoopFacts, Problem, TimingStats


def test_reference_outputs_and_cache(tmp_path: Path) -> None:
    problem = get_problem("kbench:2/1")
    cfg = cpu_config(tmp_path, measure=True, timing_budget_s=0.2)
    plan = make_plan(cfg, "cpu")
    first = get_reference(problem, cfg, plan, tmp_path / "a")
    assert not first.cache_hit and set(first.outputs) == set(plan.fixed + plan.secret)
    assert "eager" in first.timings and first.timings["eager"].n > 1

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


def test_the_cache_lookup_is_a_host_phase_of_the_reference(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hit reads and checks every file of the entry before the worker starts (on a cold `kbench eval`
    also waiting for the host's torch import): its seconds are `lookup`, not part of the worker's start."""
    from kbench.evaluate import reference_run
    from kbench.evaluate.phases import Account

    problem = get_problem("kbench:2/1")
    cfg = cpu_config(tmp_path, measure=False)
    read = reference_run._read_cached

    def slow(folder: Path):  # type: ignore[no-untyped-def]
        time.sleep(0.05)
        return read(folder)

    monkeypatch.setattr(reference_run, "_read_cached", slow)
    data = get_reference(problem, cfg, make_plan(cfg, "cpu"), tmp_path / "a")
    assert data.phases["lookup"] >= 0.05 and data.phases["wall"] > 0
    acct = Account()
    acct.worker("ref", {"wall": 1.0, "outputs": 0.3, "spawn": 0.2, "lookup": 0.5})
    assert (
        acct.nested["ref:lookup"] == 0.5 and acct.nested["ref:start"] == 0.7
    )  # the host's, not the worker's


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
    """What a reference worker leaves in a cache entry's temporary folder: one fixed seed's file."""
    jobdir.mkdir(exist_ok=True)
    result = WorkerResult(timings={"eager": TimingStats(1.0, 1.0, 0.0, 0.0, 1.0, 1, 0.0)})
    result.outputs["1000"] = save_tensors(jobdir, "out_1000", [torch.arange(1000.0)])
    result.input_checksums["1000"] = ["abc"]
    return result


def test_an_entry_is_the_workers_folder_renamed_into_place(tmp_path: Path) -> None:
    """The worker writes the fixed seeds' files once, into a temporary folder beside the entry; committing
    writes the listing and renames it, so the command's exit never waits for a copy. An output the worker
    also delivered on the device is a plain file entry there, so a later run offers its candidate a buffer
    of its layout."""
    from kbench.evaluate.device_outputs import layouts

    folder = tmp_path / "cache" / "reference" / "key"
    tmp = open_entry(folder)
    assert tmp is not None and tmp.parent == folder.parent and tmp.name.startswith(TMP_PREFIX)
    result = _one_output(tmp)
    result.outputs["1000"] = [f.model_copy(update={"received": True}) for f in result.outputs["1000"]]
    commit_entry(tmp, folder, result, [1000])
    assert not tmp.exists()
    cached = read_cache(folder)
    assert cached is not None and cached.timings == result.timings
    assert not any(f.received for f in cached.outputs["1000"])
    assert layouts(cached.outputs, [1000]) == {1000: [("float32", [1000])]}
    (got,) = load_tensors(folder, cached.outputs["1000"])
    assert torch.equal(got, torch.arange(1000.0))
    again = open_entry(folder)  # a second run of the same key: its rename finds the entry there
    assert again is not None
    commit_entry(again, folder, _one_output(again), [1000])
    assert not again.exists() and read_cache(folder) is not None


def test_an_entry_listing_its_timings_facts_as_extra_pairs_is_read(tmp_path: Path) -> None:
    """An entry whose listing keeps a timing's facts as `extra`, a list of [key, value] pairs, reads back
    with them in the typed groups (an unreadable listing would be timed again on every run: its key's
    folder stays in place)."""
    import json

    folder = tmp_path / "cache" / "reference" / "key"
    tmp = open_entry(folder)
    assert tmp is not None
    commit_entry(tmp, folder, _one_output(tmp), [1000])
    listing = json.loads((folder / "reference.json").read_text())
    eager = listing["timings"]["eager"]
    del eager["loop"], eager["clock"], eager["provenance"], eager["upstream"]
    eager["extra"] = [["batch", 8], ["stop", "done"], ["warmup", [0.25, 30, "full"]], ["spin_ms", 0.1]]
    (folder / "reference.json").write_text(json.dumps(listing))
    cached = read_cache(folder)
    assert cached is not None
    assert cached.timings["eager"].loop == LoopFacts(
        batch=8, stop="done", warmup_s=0.25, warmup_calls=30, warmup_end="full"
    )


def test_a_failed_cache_write_is_logged_and_leaves_no_entry(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "not-a-dir").write_text("")
    with caplog.at_level(logging.WARNING, logger="kbench.evaluate.reference_cache"):
        assert open_entry(tmp_path / "not-a-dir" / "key") is None  # its parent cannot be made
        folder = tmp_path / "cache" / "key"
        tmp = open_entry(folder)
        assert tmp is not None
        commit_entry(tmp, folder, _one_output(tmp), [1000, 1001])  # a seed the worker never wrote
    assert read_cache(folder) is None and not tmp.exists()
    assert sum("not written" in r.getMessage() for r in caplog.records) == 2


def test_a_write_killed_mid_way_leaves_nothing_for_the_next_one(tmp_path: Path) -> None:
    """A process killed while its worker wrote leaves its temporary folder; the next entry opened removes
    it (its owner is dead), never a live process's, nor a folder whose owner it cannot tell."""
    import subprocess
    import sys

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
    old = parent / f"{TMP_PREFIX}k3j2h1"  # an older kbench's name: its owner cannot be told
    live.mkdir()
    old.mkdir()
    tmp = open_entry(parent / "key")
    assert tmp is not None
    commit_entry(tmp, parent / "key", _one_output(tmp), [1000])
    assert not stale.exists() and live.exists() and old.exists()
    assert read_cache(parent / "key") is not None
    assert sorted(p.name for p in parent.iterdir() if p.name.startswith(TMP_PREFIX)) == sorted(
        [live.name, old.name]
    )


def test_an_entry_whose_file_changed_is_removed_and_computed_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Each file of a cache entry is checked against the digest its listing records when it is read; one
    that fails (damaged, or rewritten without the listing) makes the entry a miss, removed."""
    problem = get_problem("kbench:2/1")
    cfg = cpu_config(tmp_path, measure=False)
    first = get_reference(problem, cfg, make_plan(cfg, "cpu"), tmp_path / "a")
    (entry,) = [
        p for p in (tmp_path / "reference").iterdir() if p.is_dir() and not p.name.startswith(TMP_PREFIX)
    ]
    victim = sorted(entry.glob("out_*.bin"))[0]
    victim.write_bytes(bytes(victim.stat().st_size))  # zeros, same size
    with caplog.at_level(logging.WARNING, logger="kbench.evaluate.reference_run"):
        plan = make_plan(cfg, "cpu")
        second = get_reference(problem, cfg, plan, tmp_path / "b")
    assert not second.cache_hit and any("removed" in r.getMessage() for r in caplog.records)
    for seed in plan.fixed:
        assert torch.equal(second.outputs[seed][0], first.outputs[seed][0])  # computed again, as before
    third = get_reference(problem, cfg, make_plan(cfg, "cpu"), tmp_path / "c")
    assert third.cache_hit  # the entry was written again, whole


def _entry(parent: Path, name: str, mtime: float) -> Path:
    """A committed entry of 4,000 bytes of outputs plus its listing, last used at `mtime`."""
    folder = parent / name
    tmp = open_entry(folder)
    assert tmp is not None
    commit_entry(tmp, folder, _one_output(tmp), [1000])
    os.utime(folder / "reference.json", (mtime, mtime))
    return folder


def test_the_cache_keeps_its_size_removing_entries_of_one_size_least_recently_used_first(
    tmp_path: Path,
) -> None:
    parent = tmp_path / "reference"
    a, b, c = (_entry(parent, n, t) for n, t in (("a", 1000.0), ("b", 2000.0), ("c", 3000.0)))
    size = sum(f.stat().st_size for f in a.iterdir())
    assert size > 4000
    touch_entry(a)  # read just now: the most recent
    new = _entry(parent, "new", 500.0)  # just written; kept whatever its time says
    removed = trim_cache(parent, (2 * size + size // 2) / 1e9, keep=new)
    assert removed == [b, c] and a.is_dir() and new.is_dir() and not b.exists() and not c.exists()
    assert read_cache(a) is not None and not any(p.name.startswith(TMP_PREFIX) for p in parent.iterdir())
    assert trim_cache(parent, None, keep=new) == [] and trim_cache(parent, 1.0, keep=new) == []
    # a limit below the entry just written removes every other one, never that one
    assert trim_cache(parent, 1e-9, keep=new) == [a] and new.is_dir()


def _visit(parent: Path, name: str, floats: int, max_gb: float) -> bool:
    """One reference run's use of the cache: a hit renews the entry, a miss writes one of `floats` fp32
    outputs and trims the cache. True for a hit."""
    folder = parent / name
    if read_cache(folder) is not None:
        touch_entry(folder)
        return True
    tmp = open_entry(folder)
    assert tmp is not None
    result = WorkerResult(timings={"eager": TimingStats(1.0, 1.0, 0.0, 0.0, 1.0, 1, 0.0)})
    result.outputs["1000"] = save_tensors(tmp, "out_1000", [torch.zeros(floats)])
    result.input_checksums["1000"] = ["abc"]
    commit_entry(tmp, folder, result, [1000])
    trim_cache(parent, max_gb, keep=folder)
    return False


def _cache_bytes(parent: Path) -> int:
    return sum(f.stat().st_size for f in parent.rglob("*") if f.is_file())


def test_a_cache_smaller_than_a_pass_keeps_its_small_entries_for_the_next_pass(tmp_path: Path) -> None:
    """A run visiting more problems than the cache holds, in turn (a batch's repeated candidates, an RL
    loop over the suite), keeps the entries that save the most runs for their bytes: every small problem
    hits on each later pass. Removing the least recently used would remove each entry just before its
    problem came back, and nothing would hit."""
    parent = tmp_path / "reference"
    small, large = 1000, MIN_SIZE // 2  # floats: 4 kB and 2 MiB of outputs
    turn = [("s1", small), ("l1", large), ("s2", small), ("l2", large), ("s3", small), ("l3", large)]
    limit = 5.5 * MIN_SIZE / 1e9  # the small ones and two large ones
    hits = [[_visit(parent, name, n, limit) for name, n in turn] for _ in range(3)]
    assert hits[0] == [False] * 6
    for later in hits[1:]:
        assert later[0::2] == [True, True, True]  # every small problem, each pass
        assert sum(later[1::2]) <= 1  # at most one large one of the three fits beside the rest
        assert _cache_bytes(parent) <= limit * 1e9
    assert float((parent / FLOOR_FILE).read_text()) > 0  # removals raised the floor


def test_an_entry_unused_for_long_ages_out_whatever_its_size(tmp_path: Path) -> None:
    """Each removal raises the floor every new or renewed credit starts from, so a small entry nobody
    reads again goes once the large ones written after it carry more credit."""
    parent = tmp_path / "reference"
    limit = 2.5 * MIN_SIZE / 1e9  # the small entry and one large one
    _visit(parent, "small", 1000, limit)
    for i in range(12):
        _visit(parent, f"large{i}", MIN_SIZE // 2, limit)
        if not (parent / "small").exists():
            break
    assert not (parent / "small").exists() and 2 <= i < 11  # it outlived the first ones, not all of them


def test_an_entry_without_a_credit_goes_first_and_a_dead_writers_files_are_swept(tmp_path: Path) -> None:
    """An entry an older kbench wrote (no credit file) is removed before any credited one, however recent;
    the floor is kept on disk for the next run; a half-written credit file whose writer is gone is swept."""
    import subprocess
    import sys

    from kbench.sandbox.procs import ProcRef

    parent = tmp_path / "reference"
    old, newer = _entry(parent, "old", 9e9), _entry(parent, "newer", 1.0)
    (old / CREDIT_FILE).unlink()
    assert float((newer / CREDIT_FILE).read_text()) == 1.0  # no floor yet: 1 for an entry under MIN_SIZE
    just = _entry(parent, "just", 2.0)
    assert trim_cache(parent, 2.5 * _cache_bytes(old) / 1e9, keep=just) == [old]
    assert float((parent / FLOOR_FILE).read_text()) == 0.0
    touch_entry(newer)
    assert float((newer / CREDIT_FILE).read_text()) == 1.0
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    dead = ProcRef.of(int(gone.stdout)) or ProcRef(int(gone.stdout), 1)
    (parent / f"{TMP_PREFIX}{dead}-floor").write_text("1.5")
    sweep_stale(parent)
    assert sorted(p.name for p in parent.iterdir()) == sorted([FLOOR_FILE, "newer", "just"])


def test_a_run_past_the_cache_limit_still_hits_its_own_entry(tmp_path: Path) -> None:
    """Each reference run's entry is the one kept: with room for one entry, two problems take turns, and
    a problem evaluated again right after its own write hits the cache."""
    cfg = cpu_config(tmp_path, measure=False, reference_cache_gb=1e-9)
    p1, p2 = get_problem("kbench:2/1"), get_problem("kbench:1/19")
    get_reference(p1, cfg, make_plan(cfg, "cpu"), tmp_path / "a")
    assert get_reference(p1, cfg, make_plan(cfg, "cpu"), tmp_path / "b").cache_hit
    get_reference(p2, cfg, make_plan(cfg, "cpu"), tmp_path / "c")
    entries = [
        p for p in (tmp_path / "reference").iterdir() if p.is_dir() and not p.name.startswith(TMP_PREFIX)
    ]
    assert len(entries) == 1  # p1's was removed when p2's was written
    assert not get_reference(p1, cfg, make_plan(cfg, "cpu"), tmp_path / "d").cache_hit


@pytest.mark.slow
def test_reference_compiles_its_baseline_in_the_trusted_caches(tmp_path: Path) -> None:
    """torch.compile's caches for the baseline lie in cache_dir/trusted, not in the temporary or Triton
    folders a candidate's worker may write (a planted kernel there would slow the baseline)."""
    from kbench.evaluate.prebuild import candidate_env, reference_env

    cfg = cpu_config(tmp_path / "cache", measure=True, timing_budget_s=0.1, baselines=["eager", "compile"])
    env = reference_env(cfg, "cpu")
    trusted = (tmp_path / "cache" / "trusted").absolute()
    assert env["TORCHINDUCTOR_CACHE_DIR"] == str(trusted / "inductor")
    assert env["TRITON_CACHE_DIR"] == str(trusted / "triton")
    assert "TORCHINDUCTOR_CACHE_DIR" not in candidate_env("cpp", cfg, "cpu")  # candidates keep the defaults
    ref = get_reference(get_problem("kbench:2/23"), cfg, make_plan(cfg, "cpu"), tmp_path / "work")
    assert "compile" in ref.timings
    assert any((trusted / "inductor").rglob("*")), "the compile baseline wrote no Inductor cache there"
    # nor a precompiled header in the job's own temporary folder, which would go with it
    assert not list((tmp_path / "work").rglob("*.gch"))
